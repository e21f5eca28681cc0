package annotations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		line    string
		want    Marker
		ok      bool
		wantErr string
	}{
		{"// ordinary comment", Marker{}, false, ""},
		{"// seqby:key=x", Marker{}, false, ""},
		{"//seqby:handler", Marker{Name: "handler"}, true, ""},
		{"//seqby:event=order", Marker{Name: "event", Value: "order", HasValue: true}, true, ""},
		{"//seqby:key=client_id  \t", Marker{Name: "key", Value: "client_id", HasValue: true}, true, ""},
		{"//seqby:key=", Marker{Name: "key", HasValue: true}, true, ""},
		{"//seqby:key=a=b", Marker{Name: "key", Value: "a=b", HasValue: true}, true, ""},
		{"//seqby:", Marker{}, true, "has no name"},
		{"//seqby:key =x", Marker{Name: "key ", Value: "x", HasValue: true}, true, "is not a word"},
	}
	for _, tt := range tests {
		got, ok, err := Parse(tt.line)
		if ok != tt.ok {
			t.Errorf("Parse(%q) ok = %v, want %v", tt.line, ok, tt.ok)
		}
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%q) err = %v, want it to contain %q", tt.line, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q) err = %v", tt.line, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tt.line, diff)
		}
	}
}

func TestSuggest(t *testing.T) {
	for in, want := range map[string]string{
		"kye": "key", "hanlder": "handler", "evnt": "event", "sequental": "sequential",
		"correlates": "correlate", "commandhandlr": "commandhandler", "zzzzzz": "", "x": "",
	} {
		if got := Suggest(in); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	m := func(pos int, line string) Found {
		mk, _, _ := Parse(line)
		return Found{Marker: mk, Pos: 0 + tokenPos(pos)}
	}
	tests := []struct {
		name    string
		target  Target
		found   []Found
		keep    []string
		wantMsg []string
	}{
		{"event with key", StructType, []Found{m(1, "//seqby:event=order"), m(2, "//seqby:key=client_id")}, []string{"event", "key"}, nil},
		{"typo", StructType, []Found{m(1, "//seqby:kye=client_id")}, nil, []string{"unknown marker //seqby:kye; did you mean //seqby:key?"}},
		{"unknown far", StructType, []Found{m(1, "//seqby:zzzzzz")}, nil, []string{"unknown marker //seqby:zzzzzz; known markers: event, command"}},
		{"missing value", StructType, []Found{m(1, "//seqby:event")}, nil, []string{"marker //seqby:event needs a value: write //seqby:event=CATEGORY"}},
		{"unexpected value", OtherType, []Found{m(1, "//seqby:handler=x")}, nil, []string{"marker //seqby:handler takes no value"}},
		{"duplicate", StructType, []Found{m(1, "//seqby:event=a"), m(2, "//seqby:event=b")}, []string{"event"}, []string{"duplicate marker //seqby:event"}},
		{"handler on func", Func, []Found{m(1, "//seqby:handler")}, nil, []string{"marker //seqby:handler is not allowed on a function; //seqby:handler goes on a type"}},
		{"correlate on type", StructType, []Found{m(1, "//seqby:pm"), m(2, "//seqby:correlate=x")}, []string{"pm"}, []string{"marker //seqby:correlate is not allowed on a struct type"}},
		{"event on non-struct", OtherType, []Found{m(1, "//seqby:event=a")}, nil, []string{"not allowed on a non-struct type"}},
		{"bad category", StructType, []Found{m(1, "//seqby:event=a:b")}, nil, []string{"contains ':'"}},
		{"reserved category", StructType, []Found{m(1, "//seqby:event=__x__")}, nil, []string{"reserved __name__ form"}},
		{"space category", StructType, []Found{m(1, "//seqby:event=a b")}, nil, []string{"white space"}},
		{"brace category", StructType, []Found{m(1, "//seqby:event={a}")}, nil, []string{"contains '{' or '}'"}},
		{"key on pm", StructType, []Found{m(1, "//seqby:pm"), m(2, "//seqby:key=x")}, []string{"pm"}, []string{"//seqby:key is not allowed on a pm"}},
		{"key alone", StructType, []Found{m(1, "//seqby:key=x")}, nil, []string{"//seqby:key needs"}},
		{"sequential alone", OtherType, []Found{m(1, "//seqby:handler"), m(2, "//seqby:sequential")}, []string{"handler"}, []string{"//seqby:sequential goes on a //seqby:pm"}},
		// Issue #40: a role refused for its value, spelling or place still
		// says what the type was meant to be, so the markers that go with
		// it give no second error (and are dropped with the role).
		{"key after bad category", StructType, []Found{m(1, "//seqby:event=orders:x"), m(2, "//seqby:key=client_id")}, nil, []string{"contains ':'"}},
		{"key after empty category", StructType, []Found{m(1, "//seqby:command"), m(2, "//seqby:key=client_id")}, nil, []string{"needs a value"}},
		{"key after misspelt role", StructType, []Found{m(1, "//seqby:evnet=orders"), m(2, "//seqby:key=client_id")}, nil, []string{"did you mean //seqby:event?"}},
		{"name after handler with value", OtherType, []Found{m(1, "//seqby:handler=yes"), m(2, "//seqby:name=billing")}, nil, []string{"takes no value"}},
		{"sequential after pm with value", StructType, []Found{m(1, "//seqby:pm=yes"), m(2, "//seqby:sequential")}, nil, []string{"takes no value"}},
		{"key after event on non-struct", OtherType, []Found{m(1, "//seqby:event=a"), m(2, "//seqby:key=x")}, nil, []string{"not allowed on a non-struct type"}},
		{"bad role beside a good one", StructType, []Found{m(1, "//seqby:event=a:b"), m(2, "//seqby:handler"), m(3, "//seqby:key=x")}, []string{"key", "handler"}, []string{"contains ':'"}},
		{"key after unrelated typo", StructType, []Found{m(1, "//seqby:kye=x"), m(2, "//seqby:key=x")}, nil, []string{"did you mean //seqby:key?", "//seqby:key needs"}},
		{"two roles", StructType, []Found{m(1, "//seqby:event=a"), m(2, "//seqby:handler")}, []string{"event"}, []string{"//seqby:event and //seqby:handler on one type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, probs := Check(tt.target, tt.found)
			var keep []string
			for _, d := range Defs {
				if set.Has(d.Name) {
					keep = append(keep, d.Name)
				}
			}
			if diff := cmp.Diff(tt.keep, keep); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if len(probs) != len(tt.wantMsg) {
				t.Fatalf("got %d problems %v, want %d", len(probs), probs, len(tt.wantMsg))
			}
			for i, p := range probs {
				if !strings.Contains(p.Msg, tt.wantMsg[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, p.Msg, tt.wantMsg[i])
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"//seqby:key=client_id", "//seqby:handler", "//seqby:", "//seqby:=", "//seqby:kye", "// x", "//seqby:event=a b\t", "//seqby:é=ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, ok, err := Parse(line)
		if !ok {
			if IsMarker(line) {
				t.Fatalf("marker line %q not recognised", line)
			}
			return
		}
		if err != nil {
			return
		}
		// A valid parse round-trips up to trailing white space.
		if got, want := m.String(), strings.TrimRight(line, " \t\r\n\v\f\u0085\u00a0"); !strings.HasPrefix(want, got) || len(strings.TrimSpace(want[len(got):])) != 0 {
			t.Fatalf("Parse(%q).String() = %q", line, got)
		}
		// Check never panics, whatever the marker.
		for _, tg := range []Target{StructType, OtherType, Method, Func, Elsewhere} {
			Check(tg, []Found{{Marker: m}})
		}
	})
}

func TestNearMiss(t *testing.T) {
	tests := []struct {
		comment, want, why string
		ok                 bool
	}{
		{"// seqby:key=x", "//seqby:key=x", "space", true},
		{"//\tseqby:handler", "//seqby:handler", "space", true},
		{"/* seqby:key=x */", "//seqby:key=x", "block", true},
		{"/*seqby:event=order\n*/", "//seqby:event=order", "block", true},
		{"//SEQBY:key=x", "//seqby:key=x", "lower case", true},
		{"// SeqBy:Handler", "//seqby:handler", "space", true},
		{"//seqby:key=x", "", "", false},
		{"// uses seqby: keys", "", "", false},
		{"// seqby is a library", "", "", false},
		{"// seqby", "", "", false},
		{"// seqby: an event library", "", "", false},
		{"// Seqby:key handling is explained below", "", "", false},
		{"/* nothing */", "", "", false},
		{"// seqby:key = x", "//seqby:key=x", "space", true},
		{"// seqby: key=x", "//seqby:key=x", "space", true},
		{"//seqby:key = x", "", "", false}, // a marker line: the parser reports it
		{"// seqby: bugs", "", "", false},
		{"// seqby: handler", "//seqby:handler", "space", true},
	}
	for _, tt := range tests {
		want, why, ok := NearMiss(tt.comment)
		if ok != tt.ok || want != tt.want || !strings.Contains(why, tt.why) {
			t.Errorf("NearMiss(%q) = %q, %q, %v; want %q, …%s…, %v", tt.comment, want, why, ok, tt.want, tt.why, tt.ok)
		}
	}
}

func TestCheckHandlerName(t *testing.T) {
	for name, wantErr := range map[string]string{
		"billing.invoices":             "",
		"example.com/m/billing.Ledger": "",
		"v2_ledger-eu":                 "",
		"":                             "empty",
		"billing:invoices":             "contains ':'",
		"a{b}":                         "contains '{'",
		"two words":                    "contains ' '",
		"-x":                           "does not start with a letter or digit",
		"__x__":                        "reserved",
		"café":                         "contains 'é'",
	} {
		err := CheckHandlerName(name)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("CheckHandlerName(%q) = %v, want nil", name, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("CheckHandlerName(%q) = %v, want it to contain %q", name, err, wantErr)
		}
	}
}
