package api

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxEventBytes bounds one Server-Sent Event: a step's results are in it.
const maxEventBytes = 16 << 20

// maxEventFailures is how many streams in a row may break before the
// task's end, each without a new event, before Events gives up. A stream
// that brought events resets the count: a long task behind a proxy that
// cuts idle or old connections is followed to its end.
const maxEventFailures = 5

// errStreamEnded: the stream closed before the task's end event.
var errStreamEnded = errors.New("event stream ended before the task did")

// Events follows a task's Server-Sent Events (GET /api/tasks/{id}/events)
// and hands each to fn, until the task's end event, which it hands on
// too. It returns fn's error if fn fails, ctx's if ctx ends. A stream
// that breaks is taken up again from the last event, EventsRetryWait
// later; Events gives up after maxEventFailures breaks in a row that
// brought nothing new.
func (c *Client) Events(ctx context.Context, sessionID string, fn func(TaskEvent) error) error {
	last := 0
	for failures := 0; ; {
		before := last
		ended, err := c.followEvents(ctx, sessionID, &last, fn)
		var stop *stopError
		switch {
		case ended:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &stop):
			return stop.err
		}
		if last > before {
			failures = 0
		}
		if failures++; failures == maxEventFailures {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cmp.Or(c.EventsRetryWait, time.Second)):
		}
	}
}

// stopError ends Events without another try: the server's refusal, an
// event that does not decode, or fn's error.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

// followEvents reads one stream from event last on, and reports whether
// it saw the end. The stream must open within ReplyTimeout, then bring
// something (an event, a keepalive) every EventsIdleTimeout.
func (c *Client) followEvents(ctx context.Context, sessionID string, last *int, fn func(TaskEvent) error) (bool, error) {
	path := "/api/tasks/" + url.PathEscape(sessionID) + "/events"
	streamCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	open := cmp.Or(c.ReplyTimeout, DefaultReplyTimeout)
	watchdog := time.AfterFunc(open, func() { cancel(noReply(0, open)) })
	defer watchdog.Stop()
	req, err := c.newRequest(streamCtx, http.MethodGet, path, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last > 0 {
		req.Header.Set("Last-Event-ID", strconv.Itoa(*last))
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return false, fmt.Errorf("%w: GET %s: %w", ErrUnreachable, path, cmp.Or(expired(ctx, streamCtx), err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, &stopError{statusError(resp)}
	}
	// Open: from here on, the server's keepalives at least must come.
	idle := cmp.Or(c.EventsIdleTimeout, DefaultEventsIdleTimeout)
	if !watchdog.Stop() {
		return false, fmt.Errorf("%w: GET %s: %w", ErrUnreachable, path, context.Cause(streamCtx))
	}
	watchdog = time.AfterFunc(idle, func() { cancel(fmt.Errorf("the stream brought nothing for %s, not even a keepalive", idle)) })
	defer watchdog.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, maxEventBytes)
	var id int
	var data strings.Builder
	for sc.Scan() {
		watchdog.Reset(idle)
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var e TaskEvent
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return false, &stopError{fmt.Errorf("event %d of task %s: %w", id, sessionID, err)}
			}
			data.Reset()
			if id > 0 {
				*last = id
			}
			if err := fn(e); err != nil {
				return false, &stopError{err}
			}
			if e.Type == EventEnd {
				return true, nil
			}
		case strings.HasPrefix(line, "id:"):
			id, _ = strconv.Atoi(strings.TrimSpace(line[3:]))
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(line[5:], " "))
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("%w: GET %s: %w", ErrUnreachable, path, cmp.Or(expired(ctx, streamCtx), err))
	}
	return false, fmt.Errorf("%w: GET %s: %w", ErrUnreachable, path, errStreamEnded)
}
