package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/server/internal/httpapi"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
)

// DefaultDrainGrace is how long a draining node lets its running tasks
// finish before it hands the rest off to the other nodes.
const DefaultDrainGrace = 30 * time.Second

// drainCloseReason is the reason of the close (code 1012, service
// restart) that tells a node's devices to reconnect elsewhere.
const drainCloseReason = "draining"

// Drain readies a node of a cluster to stop, as on SIGTERM, without
// losing or repeating anything (RATIONALE.md, "Draining"):
//
//  1. it marks itself draining in its lease, refuses new device links
//     and new tasks with 503 naming why, and /api/health says so, for a
//     load balancer to send them elsewhere;
//  2. it lets the tasks it runs finish, within grace;
//  3. it hands the rest off: stops them without recording anything more,
//     and tells the other nodes, one of which adopts each and runs it on
//     from its last recorded step;
//  4. it closes its device links with 1012, service restart, reason
//     "draining": the agents reconnect to another node.
//
// Then call Shutdown, which leaves the cluster, and Close. It returns
// how many tasks were handed off.
func (s *Server) Drain(ctx context.Context, grace time.Duration) (int, error) {
	if s.cluster == nil {
		return 0, errors.New("drain: this server is a single node, not a node of a cluster: stop it with Shutdown")
	}
	// Tasks are refused before /api/health says the node drains: whoever
	// reads that must find it true.
	s.sessions.RefuseNew()
	s.draining.Store(true)
	s.cluster.SetDraining()
	s.rollouts.KickAll() // each gives its lead up, for another node to take
	s.log.Info("draining: no new device links or tasks", "grace", grace)
	if n := s.sessions.Drain(ctx, grace); n > 0 {
		s.log.Warn("draining: tasks still running after the grace are handed off to the other nodes", "tasks", n, "grace", grace)
	}
	n := s.sessions.HandOff()
	if n > 0 {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.cluster.PublishHandoff(hctx)
		cancel()
		if err != nil {
			s.log.Error("draining: handoff not announced; the other nodes adopt the tasks once this node has left", "err", err)
		}
	}
	s.reg.CloseLinks(websocket.StatusServiceRestart, drainCloseReason)
	s.log.Info("drained", "handed_off", n)
	return n, nil
}

// refuseWhileDraining answers 503 to a device link or a request that
// starts a task on a draining node, and reports whether it did.
func (s *Server) refuseWhileDraining(w http.ResponseWriter, what string) bool {
	if !s.draining.Load() {
		return false
	}
	w.Header().Set("Retry-After", "1")
	httpapi.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("%s refused: %v", what, tasks.ErrDraining))
	return true
}

// drainHealth is why a draining node is not ready, or "".
func (s *Server) drainHealth() string {
	if s.draining.Load() {
		return tasks.ErrDraining.Error()
	}
	return ""
}
