package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rotate asks for a rotation of id's token in the background; the answer
// comes on the channel.
func (ts *testServer) rotate(id string, req api.RotateRequest) <-chan rotateAnswer {
	out := make(chan rotateAnswer, 1)
	go func() {
		r, err := ts.api.RotateToken(context.Background(), id, req)
		out <- rotateAnswer{r, err}
	}()
	return out
}

type rotateAnswer struct {
	rotation api.TokenRotation
	err      error
}

func (ts *testServer) rotated(ch <-chan rotateAnswer) api.TokenRotation {
	ts.t.Helper()
	select {
	case a := <-ch:
		require.NoError(ts.t, a.err)
		return a.rotation
	case <-time.After(30 * time.Second):
		ts.t.Fatal("the rotation request did not answer")
		return api.TokenRotation{}
	}
}

// keepToken answers a ROTATE_TOKEN as an agent that kept the token does.
func (rc *rawClient) keepToken(m protocol.ServerMessage) {
	rc.t.Helper()
	rc.send(protocol.ClientMessage{Type: protocol.ClientTokenRotated, ClientID: rc.id, PrevResponseID: m.ResponseID})
}

// refusedAtUpgrade requires a connection with token to be refused with
// 401, and the server to log why, with want in it.
func (ts *testServer) refusedAtUpgrade(token, want string) {
	ts.t.Helper()
	_, err := ts.dial(token)
	require.Error(ts.t, err)
	assert.Contains(ts.t, err.Error(), "401")
	require.Eventually(ts.t, func() bool { return strings.Contains(ts.logs.String(), want) }, 5*time.Second, 10*time.Millisecond,
		"the server never logged %q", want)
}

// linked enrolls id and links it, and returns its token.
func (ts *testServer) linked(id string) (string, *rawClient) {
	ts.t.Helper()
	token := ts.enroll(id)
	rc := ts.mustDial(token)
	rc.register(id)
	return token, rc
}

// A linked device gets its new token over its link; once it confirms, the
// new token is its own and the old one is refused, saying why.
func TestALinkedDevicesTokenIsRotatedAndTheOldOneRefusedOnceConfirmed(t *testing.T) {
	ts := newTestServer(t)
	old, rc := ts.linked("kiosk-1")

	answer := ts.rotate("kiosk-1", api.RotateRequest{})
	m := rc.recvType(protocol.ServerRotateToken)
	require.True(t, strings.HasPrefix(m.Token, identity.DeviceTokenPrefix), m.Token)
	require.NotEqual(t, old, m.Token)
	_, err := ts.dial(old)
	require.NoError(t, err, "the old token works until the device confirms")
	rc.keepToken(m)
	r := ts.rotated(answer)
	assert.Equal(t, api.RotationConfirmed, r.State)
	rc.ping() // the link that carried the rotation goes on

	ts.refusedAtUpgrade(old, `token of device \"kiosk-1\" was retired by a rotation`)
	again := ts.mustDial(m.Token)
	again.register("kiosk-1")
	d, err := ts.srv.store.Devices().Get(context.Background(), "kiosk-1")
	require.NoError(t, err)
	assert.Nil(t, d.Rotation)

	ts.srv.Close()
	assert.NotContains(t, ts.logs.String(), m.Token, "the new token is never logged")
	assert.NotContains(t, ts.storedBytes(), m.Token, "the new token is not in the store")
}

// A device offline when its token is rotated keeps its old token until it
// next connects; it gets the new one after its REGISTER's ack, and
// connecting with it confirms the rotation.
func TestAnOfflineDeviceIsRotatedWhenItNextConnects(t *testing.T) {
	ts := newTestServer(t)
	old := ts.enroll("kiosk-1")

	r := ts.rotated(ts.rotate("kiosk-1", api.RotateRequest{Grace: "0s"}))
	assert.Equal(t, api.RotationPending, r.State)
	assert.Nil(t, r.SentAt)
	var d api.Device
	require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/devices/kiosk-1", nil, &d))
	require.NotNil(t, d.TokenRotation, "the device view shows the rotation pending")
	assert.Equal(t, api.RotationPending, d.TokenRotation.State)

	rc := ts.mustDial(old)
	rc.register("kiosk-1") // the ack comes first
	m := rc.recvType(protocol.ServerRotateToken)
	rc.conn.CloseNow() // as an agent that kept it and died before it said so

	again := ts.mustDial(m.Token)
	again.register("kiosk-1")
	again.ping() // no second ROTATE_TOKEN: the rotation is confirmed
	ts.refusedAtUpgrade(old, "retired by a rotation")
	var after api.Device
	require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/devices/kiosk-1", nil, &after))
	assert.Nil(t, after.TokenRotation)
}

// A token sent on a link that dropped before the device took it is
// replaced by the next one: only the token the device last got works
// besides the old one.
func TestATokenSentAgainReplacesTheOneTheDeviceNeverTook(t *testing.T) {
	ts := newTestServer(t)
	old := ts.enroll("kiosk-1")
	ts.rotated(ts.rotate("kiosk-1", api.RotateRequest{}))
	rc := ts.mustDial(old)
	rc.register("kiosk-1")
	lost := rc.recvType(protocol.ServerRotateToken)
	rc.conn.CloseNow()

	rc = ts.mustDial(old)
	rc.register("kiosk-1")
	m := rc.recvType(protocol.ServerRotateToken)
	require.NotEqual(t, lost.Token, m.Token)
	ts.refusedAtUpgrade(lost.Token, "unknown token")
	rc.keepToken(m)
	require.Eventually(t, func() bool {
		d, err := ts.srv.store.Devices().Get(context.Background(), "kiosk-1")
		return err == nil && d.Rotation == nil
	}, 5*time.Second, 10*time.Millisecond)
}

// A device that cannot keep its new token, or does not know ROTATE_TOKEN,
// keeps its old one; the rotation stays pending, with why, and is offered
// again when it next registers.
func TestADeviceThatCannotKeepItsNewTokenKeepsItsOldOne(t *testing.T) {
	for name, refuse := range map[string]func(rc *rawClient, m protocol.ServerMessage){
		"token_rotated error": func(rc *rawClient, m protocol.ServerMessage) {
			rc.send(protocol.ClientMessage{Type: protocol.ClientTokenRotated, Status: protocol.StatusError, ClientID: rc.id,
				PrevResponseID: m.ResponseID, Error: "read-only file system"})
		},
		"an agent that does not know rotate_token": func(rc *rawClient, m protocol.ServerMessage) {
			rc.send(protocol.ClientMessage{Type: protocol.ClientError, Status: protocol.StatusError, ClientID: rc.id,
				PrevResponseID: m.ResponseID, Error: `field "type": unknown value "rotate_token"`})
		},
	} {
		t.Run(name, func(t *testing.T) {
			ts := newTestServer(t)
			old, rc := ts.linked("kiosk-1")
			answer := ts.rotate("kiosk-1", api.RotateRequest{})
			m := rc.recvType(protocol.ServerRotateToken)
			refuse(rc, m)
			r := ts.rotated(answer)
			assert.Equal(t, api.RotationPending, r.State)
			assert.NotEmpty(t, r.Error)
			rc.ping()

			again := ts.mustDial(old)
			again.register("kiosk-1")
			next := again.recvType(protocol.ServerRotateToken)
			assert.NotEqual(t, m.Token, next.Token)
		})
	}
}

// With a grace, the old token keeps working for that long after the
// device confirmed, and is refused after.
func TestTheOldTokenWorksForTheGraceTheOperatorGave(t *testing.T) {
	ts := newTestServer(t)
	old, rc := ts.linked("kiosk-1")
	answer := ts.rotate("kiosk-1", api.RotateRequest{Grace: "3s"})
	rc.keepToken(rc.recvType(protocol.ServerRotateToken))
	assert.Equal(t, api.RotationConfirmed, ts.rotated(answer).State)

	_, err := ts.dial(old)
	require.NoError(t, err, "within the grace")
	assert.True(t, strings.Contains(ts.logs.String(), "device connected with its old token, within the grace of its rotation"))
	require.Eventually(t, func() bool {
		_, err := ts.dial(old)
		return err != nil
	}, 30*time.Second, 50*time.Millisecond, "the old token works past its grace")
	assert.True(t, strings.Contains(ts.logs.String(), "its grace ended"))
}

// A device linked over JSON, UFO's wire, cannot be sent a token: a
// rotation is refused, saying to enroll it again, while it is linked and
// after.
func TestARotationForAJSONLinkedDeviceIsRefused(t *testing.T) {
	ts := newTestServer(t)
	rc, err := ts.dialWire(ts.enroll("ufo-1"), protocol.JSON)
	require.NoError(t, err)
	rc.register("ufo-1")
	for _, linked := range []bool{true, false} {
		if !linked {
			rc.conn.CloseNow()
			require.Eventually(t, func() bool { return ts.srv.reg.Device("ufo-1") == nil }, 5*time.Second, 10*time.Millisecond)
		}
		code, msg := ts.apiStatus("POST", "/api/devices/ufo-1/token", api.RotateRequest{})
		assert.Equal(t, http.StatusConflict, code, "linked: %v", linked)
		assert.Contains(t, msg, `device "ufo-1" links over JSON, UFO's wire, which cannot carry a new token: enroll it again`)
	}
}

func TestRotationRequestsAreValidated(t *testing.T) {
	ts := newTestServer(t)
	ts.enroll("kiosk-1")
	for _, c := range []struct {
		path string
		req  api.RotateRequest
		code int
		want string
	}{
		{"/api/devices/nobody/token", api.RotateRequest{}, http.StatusNotFound, `device "nobody" is not enrolled`},
		{"/api/devices/kiosk-1/token", api.RotateRequest{Grace: "-1s"}, http.StatusBadRequest, `field "grace": "-1s"`},
		{"/api/devices/kiosk-1/token", api.RotateRequest{Wait: "2m"}, http.StatusBadRequest, `field "wait": "2m": want a duration from 0s to 1m0s`},
	} {
		code, msg := ts.apiStatus("POST", c.path, c.req)
		assert.Equal(t, c.code, code, c.path)
		assert.Contains(t, msg, c.want)
	}
}

// Revoking a device ends its pending rotation: enrolled again, it starts
// with none.
func TestRevokingADeviceEndsItsRotation(t *testing.T) {
	ts := newTestServer(t)
	ts.enroll("kiosk-1")
	ts.rotated(ts.rotate("kiosk-1", api.RotateRequest{}))
	require.NoError(t, ts.api.Revoke(context.Background(), "kiosk-1"))
	rc := ts.mustDial(ts.enroll("kiosk-1"))
	rc.register("kiosk-1")
	rc.ping()
}

// A TOKEN_ROTATED that answers no token sent on its link is refused.
func TestATokenRotatedForNoTokenIsRefused(t *testing.T) {
	ts := newTestServer(t)
	rc := ts.device("kiosk-1")
	rc.send(protocol.ClientMessage{Type: protocol.ClientTokenRotated, ClientID: "kiosk-1", PrevResponseID: "made-up", RequestID: "r-1"})
	m := rc.requireError(`field "prev_response_id": "made-up" names no new token sent on this link`)
	assert.Equal(t, "r-1", m.ResponseID)
}
