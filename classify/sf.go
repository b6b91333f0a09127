package classify

import "unicode/utf8"

// A small parser for Structured Field Lists and Dictionaries (RFC 9651),
// enough to read the RateLimit fields. It validates the full grammar, so a
// malformed field is rejected as a whole, as RFC 9651 requires, but it
// keeps only what the quota parser reads: the values of bare items and
// parameters. Inner lists are validated and reduced to their type.

type sfType uint8

const (
	sfInteger sfType = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBoolean
	sfDate
	sfDisplayString
	sfInnerList
)

// sfValue is a bare item. num holds Integers, Dates and Booleans (0 or 1),
// and Decimals in thousandths; str holds Strings (unescaped), Tokens,
// Display Strings (decoded) and Byte Sequences (still base64).
type sfValue struct {
	typ sfType
	num int64
	str string
}

func (v sfValue) nonNegInt() (int64, bool) {
	return v.num, v.typ == sfInteger && v.num >= 0
}

type sfParam struct {
	key string
	val sfValue
}

// sfMember is a List member or a Dictionary member (key set).
type sfMember struct {
	key    string
	val    sfValue
	params []sfParam
}

// param returns the parameter named key. Later duplicates override earlier
// ones, as in RFC 9651.
func (m *sfMember) param(key string) (sfValue, bool) {
	for i := len(m.params) - 1; i >= 0; i-- {
		if m.params[i].key == key {
			return m.params[i].val, true
		}
	}
	return sfValue{}, false
}

type sfParser struct {
	s string
	i int
}

// maxSFMembers bounds the members of a List or Dictionary read, and
// maxSFParams the parameters of one: a quota header names a few policies,
// and the readers match members against each other (a Dictionary's
// repeated keys, a policy by name), so a hostile header of 80,000 members
// cost seconds of CPU on every response. Past either bound the field is
// malformed: no quota is read from it.
const (
	maxSFMembers = 64
	maxSFParams  = 64
)

// parseSFList parses a List field value. ok is false if any part is
// malformed.
func parseSFList(s string) (list []sfMember, ok bool) {
	p := sfParser{s: trimOWS(s)}
	for !p.eof() {
		var m sfMember
		if len(list) == maxSFMembers || !p.member(&m) {
			return nil, false
		}
		list = append(list, m)
		if !p.nextMember() {
			return nil, false
		}
	}
	return list, true
}

// parseSFDict parses a Dictionary field value; a repeated key keeps its
// first position and its last value.
func parseSFDict(s string) (dict []sfMember, ok bool) {
	p := sfParser{s: trimOWS(s)}
	for !p.eof() {
		key, ok := p.key()
		if !ok || len(dict) == maxSFMembers {
			return nil, false
		}
		m := sfMember{key: key}
		if p.peek() == '=' {
			p.i++
			if !p.member(&m) {
				return nil, false
			}
		} else {
			m.val = sfValue{typ: sfBoolean, num: 1}
			if !p.params(&m.params) {
				return nil, false
			}
		}
		replaced := false
		for i := range dict {
			if dict[i].key == key {
				dict[i], replaced = m, true
				break
			}
		}
		if !replaced {
			dict = append(dict, m)
		}
		if !p.nextMember() {
			return nil, false
		}
	}
	return dict, true
}

// dictGet returns the member of d with key k.
func dictGet(d []sfMember, k string) (*sfMember, bool) {
	for i := range d {
		if d[i].key == k {
			return &d[i], true
		}
	}
	return nil, false
}

func (p *sfParser) eof() bool { return p.i >= len(p.s) }

// peek returns the next byte, or 0 at the end (0 is never valid input).
func (p *sfParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) skipSP() {
	for !p.eof() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for !p.eof() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// nextMember consumes the separator after a member: the end of input, or a
// comma followed by another member.
func (p *sfParser) nextMember() bool {
	p.skipOWS()
	if p.eof() {
		return true
	}
	if p.s[p.i] != ',' {
		return false
	}
	p.i++
	p.skipOWS()
	return !p.eof() // a trailing comma is malformed
}

// member parses an Item or an Inner List, with parameters, into m.
func (p *sfParser) member(m *sfMember) bool {
	if p.peek() == '(' {
		if !p.innerList() {
			return false
		}
		m.val = sfValue{typ: sfInnerList}
	} else {
		v, ok := p.bareItem()
		if !ok {
			return false
		}
		m.val = v
	}
	return p.params(&m.params)
}

func (p *sfParser) innerList() bool {
	p.i++ // '('
	for {
		p.skipSP()
		if p.eof() {
			return false
		}
		if p.s[p.i] == ')' {
			p.i++
			return true
		}
		if _, ok := p.bareItem(); !ok {
			return false
		}
		var discard []sfParam
		if !p.params(&discard) {
			return false
		}
		if c := p.peek(); c != ' ' && c != ')' {
			return false
		}
	}
}

func (p *sfParser) params(ps *[]sfParam) bool {
	for p.peek() == ';' {
		p.i++
		p.skipSP()
		key, ok := p.key()
		if !ok || len(*ps) == maxSFParams {
			return false
		}
		v := sfValue{typ: sfBoolean, num: 1}
		if p.peek() == '=' {
			p.i++
			if v, ok = p.bareItem(); !ok {
				return false
			}
		}
		*ps = append(*ps, sfParam{key, v})
	}
	return true
}

func (p *sfParser) key() (string, bool) {
	start := p.i
	if c := p.peek(); !isLCAlpha(c) && c != '*' {
		return "", false
	}
	p.i++
	for !p.eof() {
		c := p.s[p.i]
		if !isLCAlpha(c) && !isDigit(c) && c != '_' && c != '-' && c != '.' && c != '*' {
			break
		}
		p.i++
	}
	return p.s[start:p.i], true
}

func (p *sfParser) bareItem() (sfValue, bool) {
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || isAlpha(c):
		return p.token(), true
	case c == ':':
		return p.bytes()
	case c == '?':
		return p.boolean()
	case c == '@':
		p.i++
		v, ok := p.number()
		if !ok || v.typ != sfInteger {
			return sfValue{}, false
		}
		v.typ = sfDate
		return v, true
	case c == '%':
		return p.displayString()
	}
	return sfValue{}, false
}

func (p *sfParser) number() (sfValue, bool) {
	neg := false
	if p.peek() == '-' {
		neg = true
		p.i++
	}
	if !isDigit(p.peek()) {
		return sfValue{}, false
	}
	typ := sfInteger
	var ip, fp int64
	var id, fd int
	for !p.eof() {
		c := p.s[p.i]
		switch {
		case isDigit(c) && typ == sfInteger:
			if id++; id > 15 {
				return sfValue{}, false
			}
			ip = ip*10 + int64(c-'0')
		case isDigit(c):
			if fd++; fd > 3 {
				return sfValue{}, false
			}
			fp = fp*10 + int64(c-'0')
		case c == '.' && typ == sfInteger:
			if id > 12 {
				return sfValue{}, false
			}
			typ = sfDecimal
		default:
			goto done
		}
		p.i++
	}
done:
	n := ip
	if typ == sfDecimal {
		if fd == 0 {
			return sfValue{}, false
		}
		for ; fd < 3; fd++ {
			fp *= 10
		}
		n = ip*1000 + fp
	}
	if neg {
		n = -n
	}
	return sfValue{typ: typ, num: n}, true
}

func (p *sfParser) str() (sfValue, bool) {
	p.i++ // '"'
	start := p.i
	var buf []byte // only once an escape is seen
	for !p.eof() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.eof() {
				return sfValue{}, false
			}
			e := p.s[p.i]
			if e != '"' && e != '\\' {
				return sfValue{}, false
			}
			if buf == nil {
				buf = append([]byte(nil), p.s[start:p.i-1]...)
			}
			buf = append(buf, e)
			p.i++
		case c == '"':
			if buf == nil {
				return sfValue{typ: sfString, str: p.s[start : p.i-1]}, true
			}
			return sfValue{typ: sfString, str: string(buf)}, true
		case c < 0x20 || c >= 0x7f:
			return sfValue{}, false
		default:
			if buf != nil {
				buf = append(buf, c)
			}
		}
	}
	return sfValue{}, false
}

func (p *sfParser) token() sfValue {
	start := p.i
	p.i++ // ALPHA or '*', checked by the caller
	for !p.eof() && (isTChar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
		p.i++
	}
	return sfValue{typ: sfToken, str: p.s[start:p.i]}
}

func (p *sfParser) bytes() (sfValue, bool) {
	p.i++ // ':'
	start := p.i
	for !p.eof() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == ':':
			return sfValue{typ: sfBytes, str: p.s[start : p.i-1]}, true
		case isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=':
		default:
			return sfValue{}, false
		}
	}
	return sfValue{}, false
}

func (p *sfParser) boolean() (sfValue, bool) {
	p.i++ // '?'
	switch p.peek() {
	case '1':
		p.i++
		return sfValue{typ: sfBoolean, num: 1}, true
	case '0':
		p.i++
		return sfValue{typ: sfBoolean}, true
	}
	return sfValue{}, false
}

func (p *sfParser) displayString() (sfValue, bool) {
	p.i++ // '%'
	if p.peek() != '"' {
		return sfValue{}, false
	}
	p.i++
	var buf []byte
	for !p.eof() {
		c := p.s[p.i]
		p.i++
		switch {
		case c < 0x20 || c > 0x7e:
			return sfValue{}, false
		case c == '%':
			if p.i+2 > len(p.s) {
				return sfValue{}, false
			}
			hi, ok1 := lowerHex(p.s[p.i])
			lo, ok2 := lowerHex(p.s[p.i+1])
			if !ok1 || !ok2 {
				return sfValue{}, false
			}
			buf = append(buf, hi<<4|lo)
			p.i += 2
		case c == '"':
			if !utf8.Valid(buf) {
				return sfValue{}, false
			}
			return sfValue{typ: sfDisplayString, str: string(buf)}, true
		default:
			buf = append(buf, c)
		}
	}
	return sfValue{}, false
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case isDigit(c):
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isTChar reports an RFC 9110 token character.
func isTChar(c byte) bool {
	if isAlpha(c) || isDigit(c) {
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
