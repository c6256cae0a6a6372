package cluster

// Returns are what comes back, over NATS, to the node that asked for a
// command from the node that holds its device's link: the results
// recorded (or the device's refusal, or its shutdown), results the
// holder's store could not record, and the device's word that it
// prepares the command's tool.
type Returns struct{ c *Cluster }

// Returns are this node's: what it sends back to the nodes that ask it
// for commands, and what it hears back from the nodes it asks.
func (c *Cluster) Returns() Returns { return Returns{c} }

// SendPreparing tells node that a command it asked for waits for its
// device to prepare the tool.
func (r Returns) SendPreparing(node string, p Preparing) error {
	return r.c.publish(preparingSubject(node), p)
}

// OnPreparing calls fn with each preparation sent to this node.
func (r Returns) OnPreparing(fn func(Preparing)) error {
	return on[Preparing](r.c, preparingSubject(r.c.cfg.NodeID), fn)
}

// SendUnrecorded tells node that results u names were not recorded.
func (r Returns) SendUnrecorded(node string, u Unrecorded) error {
	u.From = r.c.cfg.NodeID
	return r.c.publish(unrecordedSubject(node), u)
}

// OnUnrecorded calls fn with each Unrecorded sent to this node.
func (r Returns) OnUnrecorded(fn func(Unrecorded)) error {
	return on[Unrecorded](r.c, unrecordedSubject(r.c.cfg.NodeID), fn)
}

// SendRecorded tells node the results rec were recorded; to every node
// if node is "" (the node that asked is not known).
func (r Returns) SendRecorded(node string, rec Recorded) error {
	if node == "" {
		return r.c.publish(recordedSubject, rec)
	}
	return r.c.publish(nodeSubject(node), rec)
}

// OnRecorded calls fn with the results recorded elsewhere that are sent
// to this node, or to every node.
func (r Returns) OnRecorded(fn func(Recorded)) error {
	if err := on[Recorded](r.c, nodeSubject(r.c.cfg.NodeID), fn); err != nil {
		return err
	}
	return on[Recorded](r.c, recordedSubject, fn)
}
