package generator

import (
	"fmt"
	"go/token"
)

// problems collects errors with token positions during a run.
type problems struct {
	fset *token.FileSet
	errs Errors
}

func (p *problems) add(pos token.Pos, format string, args ...any) {
	p.addRelated(pos, fmt.Sprintf(format, args...))
}

func (p *problems) addRelated(pos token.Pos, msg string, rel ...related) {
	e := &Error{Pos: p.fset.Position(pos), Msg: msg}
	for _, r := range rel {
		e.Related = append(e.Related, Related{Pos: p.fset.Position(r.pos), Msg: r.msg})
	}
	p.errs = append(p.errs, e)
}

// before orders positions as errors are reported: by file, line, column.
func (p *problems) before(a, b token.Pos) bool {
	return comparePositions(p.fset.Position(a), p.fset.Position(b)) < 0
}
