package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
)

// The floor: what the server's architecture costs before it does any of
// its own work. With -floor, the commands mode measures two more servers
// beside those given with -bin, both loadgen itself started as a server
// (floorServe), answering the same calls from the same callers and
// devices as aip-server does, with no store, no auth beyond comparing the
// token, no admission and no log:
//
//	floor-http  decodes the command's JSON body and answers its actions
//	            as succeeded, at once
//	floor-ws    also sends each command to its device as a CBOR COMMAND,
//	            waits for the device's COMMAND_RESULTS, read by the link's
//	            reader goroutine, and acknowledges them, as aip-server does
//
// Their CPU per command is what aip-server cannot go below with net/http,
// coder/websocket and one goroutine hand-off each way per command.

// floorToken is the floor servers' operator token.
const floorToken = "floor"

// floorBins are the two floor servers, to measure beside the -bin ones.
func floorBins() ([]serverBin, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	return []serverBin{{name: "floor-http", path: self}, {name: "floor-ws", path: self, args: []string{"-ws"}}}, nil
}

// isFloorServe tells whether loadgen was started as a floor server: as
// loadgen starts every server, with --listen first.
func isFloorServe(args []string) bool { return len(args) > 1 && args[1] == "--listen" }

// floorServe serves the floor until SIGTERM ends the process.
func floorServe(args []string) error {
	fs := flag.NewFlagSet("loadgen floor server", flag.ContinueOnError)
	listen := fs.String("listen", "", "address")
	data := fs.String("data", "", "data dir: it holds admin.token")
	ws := fs.Bool("ws", false, "send each command to its device and wait for its results")
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*data, "admin.token"), []byte(floorToken), 0o600); err != nil {
		return err
	}
	f := &floor{ws: *ws}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/devices", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("[]")) })
	mux.HandleFunc("POST /api/devices", f.enroll)
	mux.HandleFunc("POST /api/devices/{id}/commands", f.command)
	mux.HandleFunc("GET /ws", f.link)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile) // for -profile

	return http.Serve(l, mux)
}

// floor is a floor server's state: the devices' links, and the commands
// waiting for results, by response_id.
type floor struct {
	ws      bool
	links   sync.Map // device id → *protocol.Conn
	waiting sync.Map // response_id → chan []protocol.Result
	next    atomic.Int64
}

func (f *floor) enroll(w http.ResponseWriter, r *http.Request) {
	var req api.EnrollRequest
	if json.NewDecoder(r.Body).Decode(&req) != nil || !authorized(r) {
		http.Error(w, "bad enrollment", http.StatusBadRequest)
		return
	}
	json.NewEncoder(w).Encode(api.EnrollResponse{ID: req.ID, Token: req.ID})
}

func authorized(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+floorToken }

// link serves a device: the token is its id.
func (f *floor) link(w http.ResponseWriter, r *http.Request) {
	conn, err := protocol.Accept(w, r, protocol.ConnOptions{PingInterval: -1})
	if err != nil {
		return
	}
	ctx := context.Background()
	var reg protocol.ClientMessage
	if conn.Read(ctx, &reg) != nil || "Bearer "+reg.ClientID != r.Header.Get("Authorization") {
		conn.CloseNow()
		return
	}
	f.links.Store(reg.ClientID, conn)
	conn.Send(ctx, &protocol.ServerMessage{Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, Timestamp: protocol.Now(), ResponseID: reg.RequestID})
	go f.read(conn)
}

// read delivers a device's results to the commands waiting for them, and
// acknowledges them.
func (f *floor) read(conn *protocol.Conn) {
	defer conn.CloseNow()
	ctx := context.Background()
	for {
		var m protocol.ClientMessage
		if conn.Read(ctx, &m) != nil {
			return
		}
		if m.Type != protocol.ClientCommandResults {
			continue
		}
		if ch, ok := f.waiting.LoadAndDelete(m.PrevResponseID); ok {
			ch.(chan []protocol.Result) <- m.ActionResults
			conn.SendWithin(10*time.Second, &protocol.ServerMessage{Type: protocol.ServerHeartbeat, Status: protocol.StatusOK,
				SessionID: m.SessionID, Timestamp: protocol.Now(), ResponseID: m.RequestID})
		}
	}
}

// command answers a command: at once, or with its device's results.
func (f *floor) command(w http.ResponseWriter, r *http.Request) {
	var req api.CommandRequest
	if !authorized(r) || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Actions) == 0 {
		http.Error(w, "bad command", http.StatusBadRequest)
		return
	}
	id := strconv.FormatInt(f.next.Add(1), 10)
	for i := range req.Actions {
		req.Actions[i].CallID = id + "-" + strconv.Itoa(i)
	}
	results, err := f.run(r.Context(), r.PathValue("id"), id, req.Actions)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(api.NewCommandResponse(id, id, r.PathValue("id"), results))
}

// run has device run actions as command id, or, without -ws, has them
// succeed at once.
func (f *floor) run(ctx context.Context, device, id string, actions []protocol.Command) ([]protocol.Result, error) {
	if !f.ws {
		results := make([]protocol.Result, len(actions))
		for i, a := range actions {
			results[i] = protocol.Result{CallID: a.CallID, Status: protocol.ResultSuccess, Result: a.Parameters}
		}
		return results, nil
	}
	c, ok := f.links.Load(device)
	if !ok {
		return nil, fmt.Errorf("device %q not linked", device)
	}
	ch := make(chan []protocol.Result, 1)
	f.waiting.Store(id, ch)
	err := c.(*protocol.Conn).Send(ctx, &protocol.ServerMessage{Type: protocol.ServerCommand, Status: protocol.StatusContinue,
		Actions: actions, SessionID: id, ResponseID: id, Timestamp: protocol.Now()})
	if err != nil {
		f.waiting.Delete(id)
		return nil, fmt.Errorf("command to %q: %w", device, err)
	}
	select {
	case res := <-ch:
		return res, nil
	case <-ctx.Done():
		f.waiting.Delete(id)
		return nil, errors.New("caller gone")
	}
}
