// Package problem is one thing wrong with a document a person wrote, a
// plan or a tool's manifest: where, by line, column and key path, and
// what. The packages that parse those documents list them; aipctl prints
// them as a compiler does, "plan.yaml:4:17: ...".
package problem

import "fmt"

// Problem is one thing wrong with a document.
type Problem struct {
	// Path is the key path of what is wrong, e.g. "steps[1].timeout" or
	// "limits.timeout"; empty for the document as a whole (a syntax error).
	Path string
	// Line and Column locate it, from 1; 0 when unknown.
	Line, Column int
	Problem      string
}

// String is the problem on one line: "line 4, column 17: steps[0]: ...".
func (p Problem) String() string {
	var s string
	switch {
	case p.Line > 0 && p.Column > 0:
		s = fmt.Sprintf("line %d, column %d: ", p.Line, p.Column)
	case p.Line > 0:
		s = fmt.Sprintf("line %d: ", p.Line)
	}
	return s + p.What()
}

// What is the problem without its place in the document: its path and
// what is wrong there.
func (p Problem) What() string {
	if p.Path == "" {
		return p.Problem
	}
	return p.Path + ": " + p.Problem
}
