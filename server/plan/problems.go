package plan

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/internal/problem"
)

// Problem is one thing wrong with a plan: where, by line and column in
// the document and by key path (steps[1].timeout), and what, in the words
// of the plan's format, never of the Go types that hold it.
type Problem = problem.Problem

// Error is every problem Parse found in a plan, in the document's order.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "plan: " + strings.Join(lines, "; ")
}

// one is a plan error of one problem.
func one(p Problem) error { return &Error{Problems: []Problem{p}} }

// yamlErrorRe is how yaml.v3 words a syntax error.
var yamlErrorRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserProblems are the syntax errors yaml.v3's parser, as opposed to
// its scanner, reports: it gives their line counting from 0, the line
// where the construct being parsed starts, rather than where it broke.
var parserProblems = map[string]string{
	"did not find expected ',' or '}'":    `this "{" is not closed: a "}", or a "," between its entries, is missing`,
	"did not find expected ',' or ']'":    `this "[" is not closed: a "]", or a "," between its items, is missing`,
	"did not find expected '-' indicator": `this line is indented as if it went on with the list above, but it does not start a new item with "- " nor line up with its item's keys`,
	"did not find expected key":           "this line does not line up with the keys above it",
	"did not find expected node content":  "a value is missing here",
}

// syntaxProblem locates a syntax error yaml.v3 reported as err in doc,
// and says what it means.
func syntaxProblem(err error, doc []byte) error {
	m := yamlErrorRe.FindStringSubmatch(err.Error())
	if m == nil {
		return one(Problem{Problem: strings.TrimPrefix(err.Error(), "yaml: ")})
	}
	line, _ := strconv.Atoi(m[1])
	what := m[2]
	lines := strings.Split(string(doc), "\n")
	p := Problem{Line: line, Problem: what}
	if text, ok := parserProblems[what]; ok {
		p.Line, p.Problem = line+1, text
		switch what {
		case "did not find expected ',' or '}'":
			p.Column = unclosed(lineAt(lines, p.Line), '{', '}')
		case "did not find expected ',' or ']'":
			p.Column = unclosed(lineAt(lines, p.Line), '[', ']')
		default:
			p.Line = brokenLine(doc, lines, p.Line)
		}
	}
	text := lineAt(lines, p.Line)
	switch {
	case what == "found character that cannot start any token" && strings.Contains(text, "\t"):
		p.Column, p.Problem = strings.IndexByte(text, '\t')+1, "a tab: YAML indents with spaces only"
	case what == "mapping values are not allowed in this context":
		p.Problem = `": " inside a value: quote the value, or write the mapping on lines of its own`
	case what == "found unexpected end of stream":
		if col := unclosedQuote(text); col > 0 {
			p.Column, p.Problem = col, "this quote is not closed"
		}
	}
	if p.Column == 0 {
		p.Column = len(text) - len(strings.TrimLeft(text, " ")) + 1
	}
	return one(p)
}

// lineAt is line n (from 1) of lines, or "".
func lineAt(lines []string, n int) string {
	if n < 1 || n > len(lines) {
		return ""
	}
	return lines[n-1]
}

// unclosed is the column (from 1) of the last open bracket on line that
// is not closed on it, outside quotes; 0 if there is none.
func unclosed(line string, open, close byte) int {
	var stack []int
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' '):
			i = len(line)
		case c == open:
			stack = append(stack, i+1)
		case c == close && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) == 0 {
		return 0
	}
	return stack[len(stack)-1]
}

// unclosedQuote is the column (from 1) of a quote on line that is not
// closed on it; 0 if there is none.
func unclosedQuote(line string) int {
	open, quote := 0, byte(0)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			open, quote = i+1, c
		}
	}
	if quote == 0 {
		return 0
	}
	return open
}

// maxLinesSearched bounds brokenLine's search.
const maxLinesSearched = 200

// brokenLine finds where a block that starts at line from breaks: the
// first line after it such that the document up to that line no longer
// parses, yaml.v3 naming only the block's start. It returns from if it
// finds none within maxLinesSearched lines.
func brokenLine(doc []byte, lines []string, from int) int {
	end := 0
	for i := range min(from, len(lines)) {
		end += len(lines[i]) + 1
	}
	for n := from + 1; n <= min(len(lines), from+maxLinesSearched); n++ {
		end += len(lines[n-1]) + 1
		if parses(doc[:min(end, len(doc))]) != nil {
			return n
		}
	}
	return from
}

// errMore: a document followed by another.
var errMore = errors.New("more than one document")

func parses(doc []byte) error {
	_, err := parseNode(bytes.NewReader(doc))
	if errors.Is(err, errMore) {
		return nil
	}
	return err
}
