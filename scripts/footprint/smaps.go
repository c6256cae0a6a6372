package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// snapshotMark names the images of tool snapshots in smaps and
// /proc/PID/fd, which the sandbox maps copy-on-write into each call's
// memory: a memfd, "memfd:aip-snapshot", or an unnamed file of its cache
// dir, "DIR/aip-snapshots/#INODE (deleted)".
const snapshotMark = "aip-snapshot"

// snapshotMappings sums, in KiB, what /proc/PID/smaps says of the
// private mappings of tool snapshots: each running call of a snapshot tool
// has one, over the start of its memory, and each region kept for a next
// call too. (Each image is also mapped once read-only and shared, which
// the sandbox copies from to reset a region; those are not counted.) A page a call writes is copied into
// an anonymous page of its own; the rest of what is resident are the
// image's pages, in the memfd, which every call maps (smaps calls a
// shared memory page dirty whether or not a call wrote it, so Dirty says
// nothing here, and a page only one mapping holds at the moment counts as
// private).
type snapshotMappings struct {
	count   int
	size    int64 // the images mapped, whole
	rss     int64 // resident: pages read or written
	written int64 // Anonymous: pages the calls wrote, copied
	pss     int64 // Pss: resident, each shared page divided among its mappers
}

// readSnapshotMappings reads the snapshot mappings of process pid.
func readSnapshotMappings(pid int) (snapshotMappings, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return snapshotMappings{}, err
	}
	defer f.Close()
	return parseSnapshotMappings(f)
}

// parseSnapshotMappings reads smaps: a header line per mapping (address
// range, permissions, offset, device, inode, path), then "Field: N kB"
// lines.
func parseSnapshotMappings(r io.Reader) (snapshotMappings, error) {
	var m snapshotMappings
	in := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && strings.Contains(fields[5], snapshotMark) && strings.HasSuffix(fields[1], "p")
			if in {
				m.count++
			}
			continue
		}
		if !in || len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "Size:":
			m.size += kb
		case "Rss:":
			m.rss += kb
		case "Anonymous:":
			m.written += kb
		case "Pss:":
			m.pss += kb
		}
	}
	return m, sc.Err()
}

// imageHoldings are the snapshot images a process holds, and the pages
// written into them, in KiB. A memfd is shared memory, counted in no RSS
// while no call maps it, and resident all the same; a file's pages are
// page cache, which the kernel can drop and read again.
type imageHoldings struct {
	memfds, files     int
	memfdKiB, fileKiB int64
}

// snapshotImages finds the snapshot images process pid holds.
func snapshotImages(pid int) (imageHoldings, error) {
	var h imageHoldings
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return h, err
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		link, err := os.Readlink(path)
		if err != nil || !strings.Contains(link, snapshotMark) {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			continue // closed since it was listed
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		if kib := st.Blocks * 512 / 1024; strings.HasPrefix(link, "/memfd:") {
			h.memfds, h.memfdKiB = h.memfds+1, h.memfdKiB+kib
		} else {
			h.files, h.fileKiB = h.files+1, h.fileKiB+kib
		}
	}
	return h, nil
}
