package classify

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Cases follow the structured-field-tests suite of RFC 9651: each input
// either parses as a List (and then as described) or must be rejected.
func TestParseSFList(t *testing.T) {
	tests := []struct {
		in    string
		ok    bool
		count int
	}{
		{``, true, 0},
		{`   `, true, 0},
		{`1`, true, 1},
		{`-999999999999999`, true, 1},
		{`1234567890123456`, false, 0},
		{`1.5, -0.001, 123456789012.123`, true, 3},
		{`1234567890123.1`, false, 0},
		{`1.1234`, false, 0},
		{`1.`, false, 0},
		{`-`, false, 0},
		{`- 1`, false, 0},
		{`"a", "b\"c", "d\\e"`, true, 3},
		{`"a\x"`, false, 0},
		{`"unterminated`, false, 0},
		{"\"tab\there\"", false, 0},
		{`"é"`, false, 0},
		{`token, *tok, a:b/c, x!#$%&'*+-.^_|~`, true, 4},
		{`:aGVsbG8=:, ::`, true, 2},
		{`:aGVs bG8=:`, false, 0},
		{`:aGVsbG8=`, false, 0},
		{`?1, ?0`, true, 2},
		{`?2`, false, 0},
		{`?`, false, 0},
		{`@1659578233, @-1`, true, 2},
		{`@1.5`, false, 0},
		{`%"f%c3%bc%c3%bc"`, true, 1},
		{`%"%C3%BC"`, false, 0},
		{`%"%c3"`, false, 0},
		{`%"%c"`, false, 0},
		{`%"é"`, false, 0},
		{`%x`, false, 0},
		{`a;b=1;c;d="x", e`, true, 2},
		{`a; b=1`, true, 1},
		{`a;B=1`, false, 0},
		{`a;1b=1`, false, 0},
		{`a;b=`, false, 0},
		{`a;`, false, 0},
		{`("a" b 1);p=2, c`, true, 2},
		{`( a  b );p`, true, 1},
		{`()`, true, 1},
		{`("a"`, false, 0},
		{`("a"b)`, false, 0},
		{`(a (b))`, false, 0},
		{`a, b`, true, 2},
		{"a,\tb", true, 2},
		{`a,b`, true, 2},
		{`a,`, false, 0},
		{`,a`, false, 0},
		{`a,,b`, false, 0},
		{`a b`, false, 0},
		{`a=1`, false, 0},
		{`"\u0000"`, false, 0},
		{"a\x00", false, 0},
		{`<`, false, 0},
	}
	for _, tt := range tests {
		l, ok := parseSFList(tt.in)
		if ok != tt.ok || len(l) != tt.count {
			t.Errorf("parseSFList(%q) = %d members, %v; want %d, %v", tt.in, len(l), ok, tt.count, tt.ok)
		}
	}
}

func TestParseSFValues(t *testing.T) {
	l, ok := parseSFList(`"a\"b";r=5;t=-3;d=1.25;s="x\\y";tok=abc;b;f=?0;dt=@7;ds=%"%e2%82%ac"`)
	if !ok || len(l) != 1 {
		t.Fatalf("parse failed: %v %v", l, ok)
	}
	m := &l[0]
	if m.val.typ != sfString || m.val.str != `a"b` {
		t.Errorf("value = %+v", m.val)
	}
	want := map[string]sfValue{
		"r":   {typ: sfInteger, num: 5},
		"t":   {typ: sfInteger, num: -3},
		"d":   {typ: sfDecimal, num: 1250},
		"s":   {typ: sfString, str: `x\y`},
		"tok": {typ: sfToken, str: "abc"},
		"b":   {typ: sfBoolean, num: 1},
		"f":   {typ: sfBoolean},
		"dt":  {typ: sfDate, num: 7},
		"ds":  {typ: sfDisplayString, str: "€"},
	}
	for k, w := range want {
		if got, ok := m.param(k); !ok || got != w {
			t.Errorf("param %s = %+v, %v; want %+v", k, got, ok, w)
		}
	}
	if _, ok := m.param("missing"); ok {
		t.Error("missing param found")
	}
	l, _ = parseSFList(`a;r=1;r=2`)
	if v, _ := l[0].param("r"); v.num != 2 {
		t.Errorf("duplicate parameter: got %d, want the last (2)", v.num)
	}
}

func TestParseSFDict(t *testing.T) {
	tests := []struct {
		in   string
		ok   bool
		keys []string
	}{
		{`limit=100, remaining=50, reset=5`, true, []string{"limit", "remaining", "reset"}},
		{`a=1, b, c;x=2`, true, []string{"a", "b", "c"}},
		{`a=1, a=2`, true, []string{"a"}},
		{`a=(1 2);p, *b=?0`, true, []string{"a", "*b"}},
		{``, true, nil},
		{`A=1`, false, nil},
		{`"d";r=1`, false, nil},
		{`a=`, false, nil},
		{`a=1,`, false, nil},
		{`a=1 b=2`, false, nil},
	}
	for _, tt := range tests {
		d, ok := parseSFDict(tt.in)
		if ok != tt.ok || len(d) != len(tt.keys) {
			t.Errorf("parseSFDict(%q) = %v, %v; want keys %v, %v", tt.in, d, ok, tt.keys, tt.ok)
			continue
		}
		for i, k := range tt.keys {
			if d[i].key != k {
				t.Errorf("parseSFDict(%q) key %d = %q, want %q", tt.in, i, d[i].key, k)
			}
		}
	}
	d, _ := parseSFDict(`a=1, b=2, a=3`)
	if m, _ := dictGet(d, "a"); m.val.num != 3 || d[0].key != "a" {
		t.Errorf("duplicate key: %+v", d)
	}
	if m, _ := dictGet(d, "b"); m.val.num != 2 {
		t.Errorf("b = %+v", m)
	}
	if _, ok := dictGet(d, "z"); ok {
		t.Error("z found")
	}
}

// serializeSF writes members back as a List (or a Dictionary when dict is
// set), following RFC 9651 section 4.1. Inner lists come out empty, since
// the parser keeps only their type.
func serializeSF(ms []sfMember, dict bool) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString(", ")
		}
		if dict {
			b.WriteString(m.key)
			if m.val.typ == sfBoolean && m.val.num == 1 {
				serializeParams(&b, m.params)
				continue
			}
			b.WriteByte('=')
		}
		if m.val.typ == sfInnerList {
			b.WriteString("()")
		} else {
			serializeBare(&b, m.val)
		}
		serializeParams(&b, m.params)
	}
	return b.String()
}

func serializeParams(b *strings.Builder, ps []sfParam) {
	for _, p := range ps {
		b.WriteByte(';')
		b.WriteString(p.key)
		if p.val.typ == sfBoolean && p.val.num == 1 {
			continue
		}
		b.WriteByte('=')
		serializeBare(b, p.val)
	}
}

func serializeBare(b *strings.Builder, v sfValue) {
	switch v.typ {
	case sfInteger:
		b.WriteString(strconv.FormatInt(v.num, 10))
	case sfDecimal:
		n := v.num
		if n < 0 {
			b.WriteByte('-')
			n = -n
		}
		fmt.Fprintf(b, "%d.%03d", n/1000, n%1000)
	case sfString:
		b.WriteByte('"')
		for i := 0; i < len(v.str); i++ {
			if c := v.str[i]; c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(v.str[i])
		}
		b.WriteByte('"')
	case sfToken:
		b.WriteString(v.str)
	case sfBytes:
		b.WriteString(":" + v.str + ":")
	case sfBoolean:
		b.WriteString("?" + strconv.FormatInt(v.num, 10))
	case sfDate:
		b.WriteString("@" + strconv.FormatInt(v.num, 10))
	case sfDisplayString:
		b.WriteString(`%"`)
		for i := 0; i < len(v.str); i++ {
			c := v.str[i]
			if c == '%' || c == '"' || c < 0x20 || c > 0x7e {
				fmt.Fprintf(b, "%%%02x", c)
			} else {
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
	}
}

// normParams drops parameters overridden by a later one with the same key,
// which the parser keeps but a serializer need not repeat.
func normParams(ms []sfMember) {
	for i := range ms {
		var out []sfParam
		for j, p := range ms[i].params {
			last := true
			for _, q := range ms[i].params[j+1:] {
				if q.key == p.key {
					last = false
				}
			}
			if last {
				out = append(out, p)
			}
		}
		ms[i].params = out
	}
}

func TestSFRoundTrip(t *testing.T) {
	for _, s := range []string{
		`"default";r=50;t=30, tok;a;b=?0;c=-1.5;d=@-3;e=%"%c3%bc%25";f=:aGk=:, ("x" y);z`,
		`"a\"b\\c"`,
	} {
		sfRoundTrip(t, s)
	}
}

func sfRoundTrip(t *testing.T, s string) {
	t.Helper()
	if l, ok := parseSFList(s); ok {
		normParams(l)
		out := serializeSF(l, false)
		l2, ok := parseSFList(out)
		normParams(l2)
		if !ok || !reflect.DeepEqual(l, l2) && (len(l) != 0 || len(l2) != 0) {
			t.Fatalf("list round trip of %q via %q:\n%+v, %v\n%+v", s, out, l2, ok, l)
		}
	}
	if d, ok := parseSFDict(s); ok {
		normParams(d)
		out := serializeSF(d, true)
		d2, ok := parseSFDict(out)
		normParams(d2)
		if !ok || !reflect.DeepEqual(d, d2) && (len(d) != 0 || len(d2) != 0) {
			t.Fatalf("dict round trip of %q via %q:\n%+v, %v\n%+v", s, out, d2, ok, d)
		}
	}
}
