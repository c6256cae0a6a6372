package sandbox

import (
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// Policy is what an operator grants a tool, or every tool of a namespace.
// A tool gets the intersection of what its manifest requests and what its
// policy grants, and nothing else.
type Policy struct {
	// Dirs are the host directories on offer, each under the guest path a
	// tool asks for it by, read-only or read-write.
	Dirs []Mount
	// Env names the host environment variables a tool may read.
	Env []string
	// Limits override the manifest's default limits, field by field.
	Limits Limits
}

// Policies holds the policy of each namespace and tool.
type Policies struct {
	// Default applies to every tool that ByName does not name.
	Default Policy
	// ByName maps "NAMESPACE" or "NAMESPACE.TOOL" to a policy. The most
	// specific entry applies, in full: entries are not merged.
	ByName map[string]Policy
}

// For returns the policy of tool in namespace.
func (p Policies) For(namespace, tool string) Policy {
	if pol, ok := p.ByName[namespace+"."+tool]; ok {
		return pol
	}
	if pol, ok := p.ByName[namespace]; ok {
		return pol
	}
	return p.Default
}

// Spec returns what to load for mod under p: its manifest's name and
// schema, the dirs and env it requests as far as p grants them, and its
// limits with p's overrides. lookupEnv reads the host environment
// (os.LookupEnv); a granted variable that is unset is left out.
func (p Policy) Spec(mod manifest.Module, lookupEnv func(string) (string, bool)) Spec {
	m := mod.Manifest
	return Spec{
		Name:        m.Name,
		Wasm:        mod.Wasm,
		Path:        mod.Path,
		InputSchema: m.InputSchema,
		Requested:   manifestLimits(m.Limits),
		Limits:      p.Limits,
		Mounts:      grantDirs(m.Capabilities.Dirs, p.Dirs),
		Env:         grantEnv(m.Capabilities.Env, p.Env, lookupEnv),
		Init:        m.Init,
	}
}

func manifestLimits(l manifest.Limits) Limits {
	return Limits{
		Fuel:        l.Fuel,
		Timeout:     time.Duration(l.Timeout),
		MemoryPages: uint32(min((uint64(l.Memory)+pageSize-1)/pageSize, 1<<16)),
	}
}

// grantDirs intersects requested dirs with granted ones. Two directory
// trees intersect in the deeper of the two when one contains the other;
// the mode is read-only unless both sides say read-write.
func grantDirs(requested []manifest.Dir, granted []Mount) []Mount {
	byGuest := map[string]Mount{}
	for _, r := range requested {
		for _, g := range granted {
			m, ok := intersect(r, g)
			if !ok {
				continue
			}
			if _, taken := byGuest[m.GuestPath]; !taken {
				byGuest[m.GuestPath] = m
			}
		}
	}
	out := make([]Mount, 0, len(byGuest))
	for _, m := range byGuest {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GuestPath < out[j].GuestPath })
	return out
}

func intersect(r manifest.Dir, g Mount) (Mount, bool) {
	m := g
	m.ReadOnly = g.ReadOnly || r.Mode != manifest.ReadWrite
	switch {
	case r.Path == manifest.AnyDir || within(g.GuestPath, r.Path):
		return m, true
	case within(r.Path, g.GuestPath):
		// The narrower dir is found inside the grant at each call, never
		// through a host path that a link in the grant could redirect.
		rel := filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(r.Path, g.GuestPath), "/"))
		m.Sub, m.GuestPath = filepath.Join(g.Sub, rel), r.Path
		return m, true
	}
	return Mount{}, false
}

// within reports whether guest path p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, path.Clean(dir)+"/")
}

func grantEnv(requested, allowed []string, lookupEnv func(string) (string, bool)) map[string]string {
	env := map[string]string{}
	for _, k := range requested {
		if !slices.Contains(allowed, k) {
			continue
		}
		if v, ok := lookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}
