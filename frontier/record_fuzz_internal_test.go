package frontier

import (
	"net/url"
	"strings"
	"testing"

	"github.com/gocolly/colly/v2"
)

// The file's records are untrusted bytes: decoding one never panics, and
// what it accepts is an absolute http or https request that encodes back
// to the same record.
func FuzzDecodeRecord(f *testing.F) {
	u, _ := url.Parse("https://a.test/page/1?x=1")
	data, err := (&colly.Request{URL: u, Method: "GET", Depth: 2}).Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(encodeRecord(data))
	f.Add(encodeRecord([]byte(`{"URL":"ftp://a.test/"}`)))
	f.Add(encodeRecord([]byte(`{"URL":"http://a.test/","Method":"POST","Headers":{"A":["b"]},"Body":"eA=="}`)))
	f.Add(encodePlain("http://a.test/p?q=1", 3))
	f.Add(encodePlain("mailto:x", 0))
	f.Add([]byte{recordColly, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		it, err := decodeRecord(b)
		if err != nil {
			return
		}
		if it.req == nil || !webURL(it.req.URL) {
			t.Fatalf("accepted %q as %+v", b, it.req)
		}
		r, err := (&colly.Collector{}).UnmarshalRequest(it.data)
		if err != nil {
			t.Fatalf("accepted %q, which Colly cannot read: %v", b, err)
		}
		again, err := decodeRecord(encodeRecord(it.data))
		if err != nil || again.req.URL.String() != it.req.URL.String() || again.req.Method != it.req.Method {
			t.Fatalf("%q does not encode back: %v", b, err)
		}
		if b[0] == recordPlain {
			back, err := decodeRecord(encodePlain(r.URL.String(), r.Depth))
			if err != nil || back.req.URL.String() != it.req.URL.String() {
				t.Fatalf("plain %q does not encode back: %v", b, err)
			}
		}
	})
}

// Table cases of the decoder: what each damage is told as.
func TestDecodeRecord(t *testing.T) {
	good := encodeRecord([]byte(`{"URL":"http://a.test/p","Method":"GET"}`))
	flipped := append([]byte{}, good...)
	flipped[len(flipped)-3] ^= 1
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"good":      {good, ""},
		"empty":     {nil, "unknown format"},
		"format":    {append([]byte{9}, good[1:]...), "unknown format"},
		"plain":     {encodePlain("http://a.test/p", 2), ""},
		"depth":     {sealRecord(recordPlain, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 'h'}), "bad depth"},
		"plain ftp": {encodePlain("ftp://a.test/p", 2), "not an absolute"},
		"flipped":   {flipped, "checksum"},
		"not json":  {encodeRecord([]byte("{")), "does not hold a request"},
		"relative":  {encodeRecord([]byte(`{"URL":"/p"}`)), "not an absolute"},
	} {
		_, err := decodeRecord(c.b)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
}
