package blackhole

import (
	"bufio"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// echo serves lines back on a loopback listener until t ends.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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

	p.Cut()
	_, err = c.Write([]byte("two\n"))
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
	require.Equal(t, "two\n", <-got)
}
