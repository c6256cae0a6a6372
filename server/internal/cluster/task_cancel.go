package cluster

import "errors"

// taskCancelSubject is where a node asks the others to cancel a task it
// does not run: the node that runs it cancels it.
const taskCancelSubject = "aip.tasks.cancel"

// TaskCancel asks, from node From, that task ID be cancelled, Why being
// the cause its device records.
type TaskCancel struct {
	From string `json:"from"`
	ID   string `json:"id"`
	Why  string `json:"why"`
}

func (t *TaskCancel) check() error {
	switch {
	case t.ID == "":
		return errors.New(`field "id": missing`)
	case t.Why == "":
		return errors.New(`field "why": missing`)
	}
	return checkNodeID("from", t.From)
}

// PublishTaskCancel asks every other node to cancel task id, if it runs
// it, saying why.
func (c *Cluster) PublishTaskCancel(id, why string) error {
	return c.publish(taskCancelSubject, TaskCancel{From: c.cfg.NodeID, ID: id, Why: why})
}

// OnTaskCancel calls fn with each task another node asks to cancel.
func (c *Cluster) OnTaskCancel(fn func(TaskCancel)) error {
	return on[TaskCancel](c, taskCancelSubject, func(t TaskCancel) {
		if t.From != c.cfg.NodeID {
			fn(t)
		}
	})
}
