package blackhole

import (
	"bufio"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// echo serves lines back on a loopback listener until t ends.
func echo(t *testing.T) string { return echoOn(t, "tcp", "127.0.0.1:0") }

// echoOn serves lines back on a listener on network and address until t
// ends, and returns where it listens.
func echoOn(t *testing.T, network, address string) string {
	ln, err := net.Listen(network, address)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// A cut connection stays open and delivers nothing; once healed, what
// was written during the cut arrives, in order.
func TestACutLinkHoldsWhatIsWrittenUntilItHeals(t *testing.T) {
	p := Start(t, echo(t))
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	_, err = c.Write([]byte("one\n"))
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "one\n", line)

	requireHeldUntilHealed(t, p, c, r, "two\n")
}

// requireHeldUntilHealed cuts p, writes line on c through it, and
// requires it to come back on r only once p heals.
func requireHeldUntilHealed(t *testing.T, p *Proxy, c net.Conn, r *bufio.Reader, line string) {
	p.Cut()
	_, err := c.Write([]byte(line))
	require.NoError(t, err, "a cut link takes writes, as a socket whose packets are dropped does")
	got := make(chan string, 1)
	go func() {
		line, _ := r.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		t.Fatalf("read %q through a cut link", line)
	default:
	}
	p.Heal()
	require.Equal(t, line, <-got)
}

// A proxy to a Unix socket forwards, is cut and heals as one to a port.
func TestAProxyToAUnixSocketIsCutAndHealsToo(t *testing.T) {
	p := StartTo(t, "unix", echoOn(t, "unix", filepath.Join(t.TempDir(), "echo.sock")))
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	requireHeldUntilHealed(t, p, c, bufio.NewReader(c), "held\n")
}
