package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
)

// AdmissionRequest is the body of POST /api/admission: a plan, or a
// command's actions, and the devices they are for: one device, or every
// enrolled device whose labels include all of Labels. Exactly one of
// Device and Labels, and one of Plan and Actions, is given.
type AdmissionRequest struct {
	Device string            `json:"device,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Plan is the plan, as a JSON object or as text (YAML or JSON).
	Plan    json.RawMessage    `json:"plan,omitempty"`
	Actions []protocol.Command `json:"actions,omitempty"`
}

// AdmissionResponse is admission's verdict: whether the plan or command
// would be admitted on every device it is for, or else every problem,
// as a dispatch would be refused with them. Nothing is recorded or sent.
type AdmissionResponse struct {
	Admitted bool `json:"admitted"`
	// Devices are the devices checked, in the order a fleet starts them.
	Devices  []AdmissionDevice `json:"devices"`
	Problems []Problem         `json:"problems,omitempty"`
}

// AdmissionDevice is a device admission checked, and how fresh what it
// checked against is: the tools of the live registration of an online
// device, or of the last one of an offline device, which may have
// changed since.
type AdmissionDevice struct {
	ID       string     `json:"id"`
	Online   bool       `json:"online"`
	LastSeen *time.Time `json:"last_seen,omitempty"`
}

// Admission asks the server's admission stage whether req would be
// admitted, without running anything.
func (c *Client) Admission(ctx context.Context, req AdmissionRequest) (AdmissionResponse, error) {
	var out AdmissionResponse
	err := c.Do(ctx, "POST", "/api/admission", req, &out)
	return out, err
}
