package api_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
)

// startServer runs a real aip-server on loopback with a fresh data dir,
// as `aip-server --data DIR` does, with no device connected, and returns
// a client that holds its operator token, and how to stop it.
func startServer() (*api.Client, func()) {
	dir, err := os.MkdirTemp("", "aip-server-example")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(context.Background(), server.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	token, err := os.ReadFile(filepath.Join(dir, server.AdminTokenFile))
	if err != nil {
		log.Fatal(err)
	}
	stop := func() {
		srv.Shutdown()
		ts.Close()
		srv.Close()
		os.RemoveAll(dir)
	}
	return &api.Client{BaseURL: ts.URL, Token: strings.TrimSpace(string(token))}, stop
}

// A Client needs the server's URL and the operator token. Enrolling a
// device returns its token, the one time it can be read.
func Example() {
	c, stop := startServer()
	defer stop()
	ctx := context.Background()

	kiosk, err := c.Enroll(ctx, api.EnrollRequest{ID: "kiosk-1", Labels: map[string]string{"site": "lobby"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(kiosk.ID, strings.HasPrefix(kiosk.Token, "aipd_"))

	devices, err := c.Devices(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devices {
		fmt.Println(d.ID, d.Labels, "online:", d.Online)
	}
	// Output:
	// kiosk-1 true
	// kiosk-1 map[site:lobby] online: false
}

// A command's every outcome is a Result per action, with the call_id the
// server gave it: a device that is offline, or does not answer in time,
// gives failures that say so, not an error.
func ExampleClient_Command() {
	c, stop := startServer()
	defer stop()
	ctx := context.Background()
	if _, err := c.Enroll(ctx, api.EnrollRequest{ID: "kiosk-1"}); err != nil {
		log.Fatal(err)
	}

	resp, err := c.Command(ctx, "kiosk-1", api.CommandRequest{
		Actions: []protocol.Command{{ToolName: "hash_file", Parameters: map[string]any{"path": "/data/kiosk/config.json"}}},
		Timeout: "10s",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, resp.Succeeded())
	for _, r := range resp.Results {
		fmt.Println(r.CallID != "", r.Status, r.Error)
	}
	// Output:
	// failure false
	// true failure device "kiosk-1" is offline
}

// The server refuses what it cannot do with a status, which the Client
// returns as a *StatusError: here UFO's dispatch to a device that is not
// online.
func ExampleClient_Dispatch() {
	c, stop := startServer()
	defer stop()
	ctx := context.Background()

	plan := "steps:\n  - tool: hash_file\n    parameters: {path: /data/kiosk/config.json}\n"
	_, err := c.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: plan, TaskName: "nightly-check"})
	var status *api.StatusError
	if errors.As(err, &status) {
		fmt.Println(status.Code, status.Message)
	}
	// Output:
	// 404 Client not online
}

// Events follows a task to its end: here a fleet whose one device is
// offline when its turn comes, so it fails, and with it the fleet.
func ExampleClient_Events() {
	c, stop := startServer()
	defer stop()
	ctx := context.Background()
	if _, err := c.Enroll(ctx, api.EnrollRequest{ID: "kiosk-1", Labels: map[string]string{"site": "lobby"}}); err != nil {
		log.Fatal(err)
	}

	fleet, err := c.Fleet(ctx, api.FleetRequest{
		Labels: map[string]string{"site": "lobby"},
		Plan:   []byte(`{"steps": [{"tool": "hash_file", "parameters": {"path": "/data/kiosk/config.json"}}]}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	err = c.Events(ctx, fleet.SessionID, func(e api.TaskEvent) error {
		switch e.Type {
		case api.EventStepEnd:
			fmt.Println(e.Type, e.DeviceID, e.Status)
		case api.EventDeviceEnd:
			fmt.Println(e.Type, e.DeviceID, e.State)
		case api.EventEnd:
			fmt.Println(e.Type, e.State)
		default:
			fmt.Println(e.Type, e.DeviceID)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// device_start kiosk-1
	// step_start kiosk-1
	// step_end kiosk-1 failure
	// device_end kiosk-1 failed
	// end failed
}
