package main

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goBuild builds, for linux/arch, a Go program whose main prints said
// (so that two builds differ), and returns the executable's path: a
// real ELF binary, as small as Go makes one.
func goBuild(t *testing.T, arch, said string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { println(\""+said+"\") }\n"), 0o644))
	bin := filepath.Join(dir, "aip-agent-linux-"+arch)
	cmd := exec.Command(testenv.Go(), "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build for linux/%s: %s", arch, out)
	return bin
}

// releaseKeys makes a release key pair with aipctl tool keygen and
// returns the private key's path and the public key.
func releaseKeys(t *testing.T) (string, ed25519.PublicKey) {
	t.Helper()
	base := filepath.Join(t.TempDir(), "release")
	_, errOut, code := ctl(t, "tool", "keygen", "-o", base)
	require.Equal(t, exitOK, code, errOut)
	pub, err := signature.LoadPublicKey(base + ".pub")
	require.NoError(t, err)
	return base + ".key", pub
}

func TestAgentBuildsArePublishedForThePlatformTheirELFHeaderSaysSignedAndListed(t *testing.T) {
	f := newFleet(t, nil)
	key, pub := releaseKeys(t)
	arm, amd := goBuild(t, "arm64", "1.2.3"), goBuild(t, "amd64", "1.2.3")

	out, errOut, code := f.ctl("agent", "publish", arm, "--version", "1.2.3", "--key", key)
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^aip-agent 1\.2\.3 for linux/arm64: published \(sha256 [0-9a-f]{64}, [0-9.]+ MiB, key id [0-9a-f]{16}\)\n$`, out)
	_, errOut, code = f.ctl("agent", "publish", amd, "--version", "1.2.3", "--os", "linux", "--arch", "amd64", "--key", key)
	require.Equal(t, exitOK, code, errOut)
	out, _, code = f.ctl("agent", "publish", arm, "--version", "1.2.3", "--key", key)
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "unchanged: already published")

	out, _, code = f.ctl("agent", "releases")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^VERSION\s+OS\s+ARCH\s+SHA256\s+SIZE\s+KEY\s+PUBLISHED\s+BY$`, out)
	lines := regexp.MustCompile(`(?m)^1\.2\.3\s+linux\s+(\w+)\s+[0-9a-f]{12}\s+[0-9.]+ MiB\s+`+signature.KeyID(pub)+`\s+\S+ \S+\s+admin$`).FindAllStringSubmatch(out, -1)
	require.Len(t, lines, 2, out)
	assert.Equal(t, []string{"amd64", "arm64"}, []string{lines[0][1], lines[1][1]}, "newest first")

	out, _, code = f.ctl("-o", "json", "agent", "releases")
	require.Equal(t, exitOK, code)
	var kept []api.Release
	require.NoError(t, json.Unmarshal([]byte(out), &kept))
	require.Len(t, kept, 2)
	for _, k := range kept {
		assert.NoError(t, k.Verify([]ed25519.PublicKey{pub}), "%s: as a device checks it", k.Platform())
		body, err := os.ReadFile(map[string]string{"arm64": arm, "amd64": amd}[k.Arch])
		require.NoError(t, err)
		assert.Equal(t, int64(len(body)), k.Size)
		assert.Equal(t, digest(body), k.SHA256)
	}
}

func TestAPublishWhoseFlagsContradictTheBinaryIsRefusedBeforeAnythingIsSent(t *testing.T) {
	f := newFleet(t, nil)
	key, _ := releaseKeys(t)
	amd := goBuild(t, "amd64", "1.2.3")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"another arch", []string{amd, "--arch", "arm64"}, []string{"linux/amd64", "--arch arm64"}},
		{"another OS", []string{amd, "--os", "windows"}, []string{"linux/amd64", "--os windows"}},
		{"no ELF file", []string{fixturePath("echo.wasm"), "--os", "linux", "--arch", "arm64"}, []string{"echo.wasm is not an ELF executable"}},
		{"a bad version", []string{amd, "--version", "1.2.3 beta"}, []string{`version "1.2.3 beta"`}},
	} {
		args := append([]string{"agent", "publish", "--version", "1.2.3", "--key", key}, c.args...)
		_, errOut, code := f.ctl(args...)
		assert.Equal(t, exitUsage, code, "%s: %s", c.name, errOut)
		for _, w := range c.want {
			assert.Contains(t, errOut, w, c.name)
		}
	}
	kept, err := f.api.Releases(t.Context())
	require.NoError(t, err)
	assert.Empty(t, kept, "nothing was sent")
}

func TestAPublishTheServerRefusesExitsAsOtherRefusalsDo(t *testing.T) {
	f := newFleet(t, nil)
	key, _ := releaseKeys(t)
	first, rebuilt := goBuild(t, "arm64", "first"), goBuild(t, "arm64", "rebuilt")
	_, errOut, code := f.ctl("agent", "publish", first, "--version", "2.0.0", "--key", key)
	require.Equal(t, exitOK, code, errOut)
	firstBody, err := os.ReadFile(first)
	require.NoError(t, err)

	_, errOut, code = f.ctl("agent", "publish", rebuilt, "--version", "2.0.0", "--key", key)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "server answered 409")
	assert.Contains(t, errOut, digest(firstBody), "names the binary kept")

	deployer, err := f.api.AddIdentity(t.Context(), api.IdentityRequest{Name: "ops", Role: api.RoleOperator})
	require.NoError(t, err)
	_, errOut, code = f.as(deployer.Token, "agent", "publish", rebuilt, "--version", "2.0.1", "--key", key)
	assert.Equal(t, exitUnreachable, code, "an operator is no deployer: %s", errOut)
	assert.Contains(t, errOut, "403")
}
