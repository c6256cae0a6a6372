package main

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// elfPlatform is the GOOS and GOARCH an ELF executable, read from r, was
// built for, as far as its header says: "" for an OS it does not name
// (Go's linux builds, among others, say "System V") or a machine Go
// does not build for. ok is false for a file that is no ELF executable.
func elfPlatform(r io.ReaderAt) (goos, goarch string, ok bool, err error) {
	f, err := elf.NewFile(r)
	var format *elf.FormatError
	switch {
	case errors.As(err, &format):
		return "", "", false, nil
	case err != nil:
		return "", "", false, err
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", "", false, nil
	}
	return elfOS[f.OSABI], elfArch(f.FileHeader), true, nil
}

// elfOS are the OSes an ELF header may name, as Go calls them.
var elfOS = map[elf.OSABI]string{
	elf.ELFOSABI_LINUX:   "linux",
	elf.ELFOSABI_FREEBSD: "freebsd",
	elf.ELFOSABI_NETBSD:  "netbsd",
	elf.ELFOSABI_OPENBSD: "openbsd",
}

// elfOSes are the OSes whose executables are ELF files: a build for one
// of them that is not ELF is no build for it.
var elfOSes = map[string]bool{"linux": true, "freebsd": true, "netbsd": true, "openbsd": true, "dragonfly": true, "android": true}

// elfArch is the GOARCH of an ELF header's machine, word size and byte
// order, or "".
func elfArch(h elf.FileHeader) string {
	wide, little := h.Class == elf.ELFCLASS64, h.ByteOrder == binary.LittleEndian
	switch h.Machine {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	case elf.EM_386:
		return "386"
	case elf.EM_ARM:
		return "arm"
	case elf.EM_RISCV:
		return pick(wide, "riscv64", "")
	case elf.EM_LOONGARCH:
		return "loong64"
	case elf.EM_S390:
		return "s390x"
	case elf.EM_PPC64:
		return pick(little, "ppc64le", "ppc64")
	case elf.EM_MIPS:
		return pick(wide, "mips64", "mips") + pick(little, "le", "")
	}
	return ""
}

func pick(c bool, yes, no string) string {
	if c {
		return yes
	}
	return no
}

// releasePlatform is the OS and architecture of a release of the binary
// path, read from r: the flags', if given, which must agree with what
// its ELF header says; else the header's, an OS it does not name being
// linux. A binary for an ELF OS that is no ELF file is refused; one for
// another OS (windows, darwin) has no header read, and needs both flags.
func releasePlatform(path string, r io.ReaderAt, goos, goarch string) (string, string, error) {
	fileOS, fileArch, isELF, err := elfPlatform(r)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("%s: %w", path, err)
	case !isELF && (goos == "" || goarch == "" || elfOSes[goos]):
		return "", "", fmt.Errorf("%s is not an ELF executable, as an agent built for linux is: for another OS give --os and --arch", path)
	case !isELF:
		return goos, goarch, nil
	case fileArch == "" && goarch == "":
		return "", "", fmt.Errorf("%s: its ELF header names no architecture Go builds for: give --arch", path)
	}
	said := cmp.Or(fileOS, "linux") + "/" + cmp.Or(fileArch, "?")
	if goos != "" && (!elfOSes[goos] || fileOS != "" && fileOS != goos) {
		return "", "", fmt.Errorf("%s is built for %s, its ELF header says; --os %s says otherwise", path, said, goos)
	}
	if goarch != "" && fileArch != "" && goarch != fileArch {
		return "", "", fmt.Errorf("%s is built for %s, its ELF header says; --arch %s says otherwise", path, said, goarch)
	}
	return cmp.Or(goos, fileOS, "linux"), cmp.Or(goarch, fileArch), nil
}
