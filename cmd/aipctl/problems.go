package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/internal/problem"
)

// fileFailure says what is wrong with the file path, a problem to a line,
// each located as a compiler does it, "plan.yaml:4:17: ...", so that an
// editor can jump there.
func fileFailure(path, what string, problems []problem.Problem) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s:", path, what)
	for _, p := range problems {
		at := path
		if p.Line > 0 {
			at += ":" + strconv.Itoa(p.Line)
			if p.Column > 0 {
				at += ":" + strconv.Itoa(p.Column)
			}
		}
		fmt.Fprintf(&b, "\n  %s: %s", at, p.What())
	}
	return errors.New(b.String())
}
