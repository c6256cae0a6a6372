package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// registerTimeout is how long a new connection has to send REGISTER.
const registerTimeout = 10 * time.Second

// serveWS is GET /ws: it authenticates the device before the upgrade, then
// expects REGISTER and serves the connection until it drops.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	dev, err := s.authDevice(r)
	if err != nil {
		s.log.Warn("device refused at upgrade", "remote", r.RemoteAddr, "err", err)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	opts := s.cfg.Conn
	opts.Reject = protocol.ServerErrorReply
	opts.Logger = s.log.With("device", dev.ID)
	conn, err := protocol.Accept(w, r, opts)
	if err != nil {
		s.log.Warn("websocket upgrade failed", "device", dev.ID, "err", err)
		return
	}
	defer conn.CloseNow()
	ctx := r.Context()
	dc, err := s.register(ctx, conn, dev)
	if err != nil {
		s.log.Warn("registration refused", "device", dev.ID, "err", err)
		s.sendError(ctx, conn, err.Error())
		conn.Close(websocket.StatusPolicyViolation, "registration refused")
		return
	}
	defer s.unregister(dc)
	s.serveDevice(ctx, dc)
}

// authDevice finds the enrolled device the request's token belongs to.
func (s *Server) authDevice(r *http.Request) (store.Device, error) {
	token := requestToken(r, true)
	if token == "" {
		return store.Device{}, errors.New("no token")
	}
	hash := hashToken(token)
	dev, err := s.store.DeviceByTokenHash(r.Context(), hash)
	if err != nil {
		return dev, err
	}
	if !sameHash(dev.TokenHash, hash) {
		return dev, errors.New("token mismatch")
	}
	return dev, nil
}

// register reads the REGISTER message, checks it against the device the
// token belongs to, and makes the connection the device's current one.
func (s *Server) register(ctx context.Context, conn *protocol.Conn, dev store.Device) (*deviceConn, error) {
	rctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	var m protocol.ClientMessage
	if err := conn.Read(rctx, &m); err != nil {
		return nil, fmt.Errorf("waiting for register: %w", err)
	}
	switch {
	case m.Type != protocol.ClientRegister:
		return nil, fmt.Errorf("first message must be %q, got %q", protocol.ClientRegister, m.Type)
	case m.ClientID != dev.ID:
		return nil, fmt.Errorf("field \"client_id\": %q does not match the device token's device %q", m.ClientID, dev.ID)
	case m.ClientType != protocol.ClientDevice:
		return nil, fmt.Errorf("field \"client_type\": %q is not allowed with a device token", m.ClientType)
	}
	dc := &deviceConn{id: dev.ID, conn: conn, connectedAt: time.Now()}
	s.updateInfo(ctx, dc, &m)
	if old := s.reg.add(dc); old != nil {
		s.log.Info("device reconnected; closing its stale link", "device", dev.ID)
		old.conn.Close(websocket.StatusPolicyViolation, "superseded by a new connection")
	}
	ack := &protocol.ServerMessage{Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, Timestamp: protocol.Now(), ResponseID: m.RequestID}
	if err := s.send(ctx, conn, ack); err != nil {
		s.reg.remove(dc)
		return nil, fmt.Errorf("ack: %w", err)
	}
	s.log.Info("device registered", "device", dev.ID, "wire", conn.Encoding(), "tools", toolCount(dc.info.Load()))
	return dc, nil
}

// updateInfo keeps the system info of a REGISTER: on the connection, and
// in the store for when the device is offline.
func (s *Server) updateInfo(ctx context.Context, dc *deviceConn, m *protocol.ClientMessage) {
	info := systemInfoOf(m.Metadata, s.log)
	dc.info.Store(info)
	var infoJSON json.RawMessage
	if info != nil {
		infoJSON, _ = json.Marshal(info)
	}
	if err := s.store.SeeDevice(ctx, dc.id, infoJSON); err != nil {
		s.log.Error("registration not recorded", "device", dc.id, "err", err)
	}
}

// reregister takes a REGISTER on a registered connection as an update of
// the device's system info, e.g. its tool inventory after a tool was
// deployed, and acknowledges it as the first.
func (s *Server) reregister(ctx context.Context, dc *deviceConn, m *protocol.ClientMessage) {
	if m.ClientType != protocol.ClientDevice {
		s.sendError(ctx, dc.conn, fmt.Sprintf("field \"client_type\": %q is not allowed with a device token", m.ClientType))
		return
	}
	s.updateInfo(ctx, dc, m)
	s.log.Info("device inventory updated", "device", dc.id, "tools", toolCount(dc.info.Load()))
	s.send(ctx, dc.conn, &protocol.ServerMessage{Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, Timestamp: protocol.Now(), ResponseID: m.RequestID})
}

func (s *Server) unregister(dc *deviceConn) {
	s.reg.remove(dc)
	s.disp.linkDropped(dc)
	s.log.Info("device disconnected", "device", dc.id)
}

// serveDevice reads the device's messages until the link drops.
func (s *Server) serveDevice(ctx context.Context, dc *deviceConn) {
	for {
		var m protocol.ClientMessage
		if err := dc.conn.Read(ctx, &m); err != nil {
			s.log.Info("device link ended", "device", dc.id, "err", err)
			return
		}
		if m.ClientID != "" && m.ClientID != dc.id {
			s.sendError(ctx, dc.conn, fmt.Sprintf("field \"client_id\": %q is not this connection's device %q", m.ClientID, dc.id))
			continue
		}
		s.handleDeviceMessage(ctx, dc, &m)
	}
}

func (s *Server) handleDeviceMessage(ctx context.Context, dc *deviceConn, m *protocol.ClientMessage) {
	switch m.Type {
	case protocol.ClientHeartbeat:
		if err := s.store.SeeDevice(ctx, dc.id, nil); err != nil {
			s.log.Warn("heartbeat not recorded", "device", dc.id, "err", err)
		}
		s.send(ctx, dc.conn, &protocol.ServerMessage{Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, Timestamp: protocol.Now(), ResponseID: m.RequestID})
	case protocol.ClientCommandResults:
		if err := s.disp.resolve(dc, m); err != nil {
			s.sendError(ctx, dc.conn, err.Error())
		}
	case protocol.ClientError:
		s.log.Warn("device reported an error", "device", dc.id, "error", m.Error)
	case protocol.ClientRegister:
		s.reregister(ctx, dc, m)
	default:
		s.sendError(ctx, dc.conn, fmt.Sprintf("message type %q is not accepted from a device", m.Type))
	}
}

func (s *Server) send(ctx context.Context, conn *protocol.Conn, m *protocol.ServerMessage) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return conn.Send(sctx, m)
}

func (s *Server) sendError(ctx context.Context, conn *protocol.Conn, msg string) {
	s.send(ctx, conn, &protocol.ServerMessage{Type: protocol.ServerError, Status: protocol.StatusError, Error: msg, Timestamp: protocol.Now()})
}

// systemInfoOf reads the SystemInfo from register metadata. A device that
// sends none, or one we cannot read, still registers, without inventory.
func systemInfoOf(md map[string]any, log *slog.Logger) *protocol.SystemInfo {
	raw, ok := md[protocol.MetadataSystemInfo]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	var info protocol.SystemInfo
	if err == nil {
		err = json.Unmarshal(b, &info)
	}
	if err != nil {
		log.Warn("unreadable system_info in register metadata", "err", err)
		return nil
	}
	return &info
}

func toolCount(info *protocol.SystemInfo) int {
	if info == nil {
		return 0
	}
	return len(info.Tools)
}
