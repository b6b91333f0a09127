package classify

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// timeoutError is a net.Error whose Timeout is configurable.
type timeoutError struct{ timeout bool }

func (e timeoutError) Error() string   { return fmt.Sprintf("fake net error (timeout=%v)", e.timeout) }
func (e timeoutError) Timeout() bool   { return e.timeout }
func (e timeoutError) Temporary() bool { return false }

var _ net.Error = timeoutError{}

// urlErr wraps err as http.Client does.
func urlErr(err error) error {
	return &url.Error{Op: "Get", URL: "http://example.test/", Err: err}
}

// opErr wraps a system error as the net package does.
func opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, err)}
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestStatusTable(t *testing.T) {
	tests := []struct {
		status int
		want   Class
	}{
		{0, Neutral},
		{-1, Neutral},
		{100, Neutral},
		{101, Neutral},
		{200, Success},
		{201, Success},
		{203, Success},
		{204, Success},
		{206, Success},
		{299, Success},
		{301, Success},
		{302, Success},
		{304, Success},
		{399, Success},
		{400, Neutral},
		{401, Neutral},
		{402, Neutral},
		{403, Blocked},
		{404, Neutral},
		{405, Neutral},
		{407, Neutral},
		{408, Neutral},
		{410, Neutral},
		{418, Neutral},
		{420, Neutral},
		{428, Neutral},
		{429, Throttled},
		{431, Neutral},
		{451, Neutral},
		{499, Neutral},
		{500, Neutral},
		{501, Neutral},
		{502, Overloaded},
		{503, Overloaded},
		{504, Overloaded},
		{505, Neutral},
		{507, Neutral},
		{509, Neutral},
		{511, Neutral},
		{519, Neutral},
		{520, Overloaded},
		{521, Overloaded},
		{522, Overloaded},
		{523, Overloaded},
		{524, Overloaded},
		{525, Overloaded},
		{526, Overloaded},
		{527, Overloaded},
		{528, Overloaded},
		{529, Overloaded},
		{530, Neutral},
		{599, Neutral},
		{600, Neutral},
		{999, Neutral},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			if got := Status(tt.status, nil, nil); got != tt.want {
				t.Errorf("Status(%d, nil, nil) = %v, want %v", tt.status, got, tt.want)
			}
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}}
			if got := Response(resp, nil); got != tt.want {
				t.Errorf("Response(%d) = %v, want %v", tt.status, got, tt.want)
			}
			// Colly reports statuses >= 203 as errors carrying the status
			// text; the class must not change.
			cerr := errors.New(http.StatusText(tt.status))
			if got := Status(tt.status, http.Header{}, cerr); got != tt.want {
				t.Errorf("Status(%d, {}, %q) = %v, want %v", tt.status, cerr, got, tt.want)
			}
		})
	}
}

func TestClassifyErrors(t *testing.T) {
	hostCert := &x509.Certificate{DNSNames: []string{"example.com"}}
	tests := []struct {
		name   string
		status int
		err    error
		want   Class
	}{
		{"nil error no response", 0, nil, Neutral},
		{"dns not found", 0, urlErr(&net.OpError{Op: "dial", Net: "tcp",
			Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}), Neutral},
		{"dns timeout", 0, urlErr(&net.OpError{Op: "dial", Net: "tcp",
			Err: &net.DNSError{Err: "i/o timeout", Name: "x.test", IsTimeout: true}}), Neutral},
		{"dns temporary", 0, urlErr(&net.DNSError{Err: "server misbehaving", Name: "x.test", IsTemporary: true}), Neutral},
		{"x509 unknown authority", 0, urlErr(&tls.CertificateVerificationError{
			Err: x509.UnknownAuthorityError{Cert: hostCert}}), Neutral},
		{"x509 unknown authority bare", 0, urlErr(x509.UnknownAuthorityError{}), Neutral},
		{"x509 hostname", 0, urlErr(&tls.CertificateVerificationError{
			Err: x509.HostnameError{Certificate: hostCert, Host: "wrong.test"}}), Neutral},
		{"x509 hostname bare", 0, urlErr(x509.HostnameError{Certificate: hostCert, Host: "wrong.test"}), Neutral},
		{"x509 expired", 0, urlErr(&tls.CertificateVerificationError{
			Err: x509.CertificateInvalidError{Cert: hostCert, Reason: x509.Expired}}), Neutral},
		{"tls verification only", 0, urlErr(&tls.CertificateVerificationError{Err: errors.New("custom verify")}), Neutral},
		{"tls record header", 0, urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), Neutral},
		{"system roots", 0, urlErr(x509.SystemRootsError{}), Neutral},
		{"canceled", 0, urlErr(context.Canceled), Canceled},
		{"canceled bare", 0, context.Canceled, Canceled},
		{"canceled wrapped", 0, fmt.Errorf("colly: %w", urlErr(context.Canceled)), Canceled},
		{"canceled beats timeout", 0, errors.Join(timeoutError{true}, context.Canceled), Canceled},
		{"deadline exceeded", 0, urlErr(context.DeadlineExceeded), TransportFailure},
		{"os deadline", 0, urlErr(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), TransportFailure},
		{"net.Error timeout", 0, urlErr(timeoutError{true}), TransportFailure},
		{"net.Error timeout bare", 0, timeoutError{true}, TransportFailure},
		{"net.Error not timeout", 0, urlErr(timeoutError{false}), Neutral},
		{"timeout under fmt wrap", 0, urlErr(fmt.Errorf("proxy: %w", timeoutError{true})), TransportFailure},
		{"timeout in join", 0, errors.Join(errors.New("x"), timeoutError{true}), TransportFailure},
		{"unexpected EOF", 0, urlErr(io.ErrUnexpectedEOF), TransportFailure},
		{"EOF", 0, urlErr(io.EOF), TransportFailure},
		{"EOF wrapped", 0, fmt.Errorf("reading body: %w", io.EOF), TransportFailure},
		{"unknown error", 0, urlErr(errors.New("unsupported protocol scheme")), Neutral},
		{"redirect loop", 0, urlErr(errors.New("stopped after 10 redirects")), Neutral},

		// A status below 400 with an error: transport errors win (the body
		// never fully arrived), unknown errors defer to the status.
		{"200 + unexpected EOF", 200, io.ErrUnexpectedEOF, TransportFailure},
		{"200 + body timeout", 200, timeoutError{true}, TransportFailure},
		{"200 + canceled", 200, context.Canceled, Canceled},
		{"204 colly No Content", 204, errors.New("No Content"), Success},
		{"304 + unknown", 304, errors.New("Not Modified"), Success},
		{"101 + unknown", 101, errors.New("Switching Protocols"), Neutral},
		// A status of 400 or more is the server's answer whatever the error.
		{"429 + canceled", 429, context.Canceled, Throttled},
		{"503 + EOF", 503, io.ErrUnexpectedEOF, Overloaded},
		{"403 + text", 403, errors.New("Forbidden"), Blocked},
		{"404 + timeout", 404, timeoutError{true}, Neutral},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Status(tt.status, nil, tt.err); got != tt.want {
				t.Errorf("Status(%d, nil, %v) = %v, want %v", tt.status, tt.err, got, tt.want)
			}
			if tt.status == 0 {
				if got := Response(nil, tt.err); got != tt.want {
					t.Errorf("Response(nil, %v) = %v, want %v", tt.err, got, tt.want)
				}
			}
		})
	}
}

func TestClassifyHeadersAndDetectors(t *testing.T) {
	marker := &Classifier{Detectors: []Detector{CloudflareChallenge, BodyMarkers("Access Denied", "px-captcha")}}
	noDetect := &Classifier{Detectors: []Detector{}}
	overrides := &Classifier{Statuses: map[int]Class{500: Overloaded, 401: Blocked, 404: Success}}
	var nilClassifier *Classifier
	cf := header("Cf-Mitigated", "challenge")
	tests := []struct {
		name string
		c    *Classifier
		o    Outcome
		want Class
	}{
		{"cf challenge 403", nil, Outcome{Status: 403, Header: cf}, Blocked},
		{"cf challenge 200", nil, Outcome{Status: 200, Header: cf}, Blocked},
		{"cf challenge 429", nil, Outcome{Status: 429, Header: cf}, Blocked},
		{"cf challenge 503", nil, Outcome{Status: 503, Header: cf}, Blocked},
		{"cf challenge with error", nil, Outcome{Status: 403, Header: cf, Err: errors.New("Forbidden")}, Blocked},
		{"cf challenge mixed case and space", nil, Outcome{Status: 200, Header: header("cf-mitigated", " Challenge ")}, Blocked},
		{"cf challenge in list", nil, Outcome{Status: 200, Header: header("cf-mitigated", "foo, challenge")}, Blocked},
		{"cf other value", nil, Outcome{Status: 200, Header: header("cf-mitigated", "managed")}, Success},
		{"cf challenge detection disabled", noDetect, Outcome{Status: 200, Header: cf}, Success},
		{"body marker 200", marker, Outcome{Status: 200, Body: []byte("<title>ACCESS DENIED</title>")}, Blocked},
		{"body marker 404", marker, Outcome{Status: 404, Body: []byte(`<div id="px-captcha">`)}, Blocked},
		{"body marker absent", marker, Outcome{Status: 200, Body: []byte("<title>Welcome</title>")}, Success},
		{"body nil", marker, Outcome{Status: 200}, Success},
		{"body marker not run by default", nil, Outcome{Status: 200, Body: []byte("access denied")}, Success},
		{"403 with Retry-After", nil, Outcome{Status: 403, Header: header("Retry-After", "60")}, Throttled},
		{"403 with Retry-After date", nil, Outcome{Status: 403, Header: header("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT")}, Throttled},
		{"403 with bad Retry-After", nil, Outcome{Status: 403, Header: header("Retry-After", "soon")}, Blocked},
		{"403 GitHub primary limit", nil, Outcome{Status: 403, Header: header(
			"X-Ratelimit-Limit", "5000", "X-Ratelimit-Remaining", "0",
			"X-Ratelimit-Reset", "1750000000", "X-Ratelimit-Resource", "core")}, Throttled},
		{"403 IETF r=0", nil, Outcome{Status: 403, Header: header("RateLimit", `"default";r=0;t=10`)}, Throttled},
		{"403 quota left", nil, Outcome{Status: 403, Header: header("X-Ratelimit-Remaining", "12")}, Blocked},
		{"429 any header", nil, Outcome{Status: 429, Header: header("Retry-After", "1")}, Throttled},
		{"override 500", overrides, Outcome{Status: 500}, Overloaded},
		{"override 401", overrides, Outcome{Status: 401}, Blocked},
		{"override 404", overrides, Outcome{Status: 404, Err: errors.New("Not Found")}, Success},
		{"override leaves others", overrides, Outcome{Status: 503}, Overloaded},
		{"override ignored for transport error", overrides, Outcome{Err: io.EOF}, TransportFailure},
		{"nil classifier", nilClassifier, Outcome{Status: 403, Header: cf}, Blocked},
		{"nil detector entry", &Classifier{Detectors: []Detector{nil}}, Outcome{Status: 200, Header: cf}, Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			if c == nil && tt.name != "nil classifier" {
				c = &Classifier{}
			}
			if got := c.Classify(tt.o); got != tt.want {
				t.Errorf("Classify(%+v) = %v, want %v", tt.o, got, tt.want)
			}
		})
	}
}

func TestDetectorsSkippedWithoutResponse(t *testing.T) {
	called := 0
	c := &Classifier{Detectors: []Detector{func(Outcome) bool { called++; return true }}}
	if got := c.Classify(Outcome{Err: urlErr(opErr("dial", errRefused))}); got != TransportFailure {
		t.Errorf("got %v, want transport-failure", got)
	}
	if called != 0 {
		t.Errorf("detector ran %d times for an outcome without a response", called)
	}
	if got := c.Classify(Outcome{Status: 200}); got != Blocked || called != 1 {
		t.Errorf("got %v after %d calls, want blocked after 1", got, called)
	}
}

func TestDefaultDetectors(t *testing.T) {
	if len(DefaultDetectors) != 1 {
		t.Fatalf("DefaultDetectors has %d entries, want 1", len(DefaultDetectors))
	}
	if !DefaultDetectors[0](Outcome{Header: header("Cf-Mitigated", "challenge")}) {
		t.Error("DefaultDetectors[0] is not CloudflareChallenge")
	}
}

func TestBodyMarkers(t *testing.T) {
	tests := []struct {
		name    string
		markers []string
		body    string
		want    bool
	}{
		{"ascii fold", []string{"access denied"}, "xx ACCESS Denied yy", true},
		{"at start", []string{"captcha"}, "Captcha", true},
		{"at end", []string{"blocked"}, "you are BLOCKED", true},
		{"longer than body", []string{"access denied"}, "access", false},
		{"second marker", []string{"nope", "robot"}, "Are you a Robot?", true},
		{"none match", []string{"nope"}, "fine", false},
		{"empty markers ignored", []string{""}, "anything", false},
		{"no markers", nil, "anything", false},
		{"unicode fold", []string{"доступ запрещён"}, "<h1>ДОСТУП ЗАПРЕЩЁН</h1>", true},
		{"unicode first rune", []string{"Ünzulässig"}, "ÜNZULÄSSIG", true},
		{"non-letter first byte", []string{"/cdn-cgi/challenge-platform/"}, `src="/CDN-CGI/challenge-platform/h/b"`, true},
		{"partial overlap", []string{"aab"}, "aaab", true},
		{"empty body", []string{"x"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := BodyMarkers(tt.markers...)
			if got := d(Outcome{Body: []byte(tt.body)}); got != tt.want {
				t.Errorf("BodyMarkers(%q)(%q) = %v, want %v", tt.markers, tt.body, got, tt.want)
			}
		})
	}
	if BodyMarkers("x")(Outcome{}) {
		t.Error("nil Body matched")
	}
}

func TestBodyMarkersAllocs(t *testing.T) {
	d := BodyMarkers("access denied", "captcha")
	o := Outcome{Status: 200, Body: []byte("<html><body>a perfectly ordinary page of some length, with no marker in it at all</body></html>")}
	if n := testing.AllocsPerRun(100, func() { d(o) }); n != 0 {
		t.Errorf("BodyMarkers detector allocates %v times per run, want 0", n)
	}
}

// The tests below produce the errors a real http.Client returns.

func TestRealClientErrors(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Skip("no loopback:", err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = http.Get("http://" + addr + "/")
		if err == nil {
			t.Skip("port reused")
		}
		if got := Response(nil, err); got != TransportFailure {
			t.Errorf("Response(nil, %v) = %v, want transport-failure", err, got)
		}
	})
	t.Run("closed before response", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}))
		defer srv.Close()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil) // not retried by the transport
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatal("no error")
		}
		if got := Response(resp, err); got != TransportFailure {
			t.Errorf("Response(nil, %v) = %v, want transport-failure", err, got)
		}
	})
	t.Run("EOF mid-body", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
			buf.Flush()
			conn.Close()
		}))
		defer srv.Close()
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := Status(resp.StatusCode, resp.Header, err); got != TransportFailure {
			t.Errorf("Status(200, _, %v) = %v, want transport-failure", err, got)
		}
	})
	t.Run("unknown authority", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.Config.ErrorLog = quietLog()
		defer srv.Close()
		c := &http.Client{Transport: &http.Transport{}}
		_, err := c.Get(srv.URL)
		if got := Response(nil, err); got != Neutral {
			t.Errorf("Response(nil, %v) = %v, want neutral", err, got)
		}
		var ua x509.UnknownAuthorityError
		if !errors.As(err, &ua) {
			t.Logf("note: error is %T %v", err, err)
		}
	})
	t.Run("wrong hostname", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.Config.ErrorLog = quietLog()
		defer srv.Close()
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.ServerName = "wrong.invalid"
		_, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if got := Response(nil, err); got != Neutral {
			t.Errorf("Response(nil, %v) = %v, want neutral", err, got)
		}
	})
	t.Run("context canceled", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		defer srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		_, err := srv.Client().Do(req)
		if got := Response(nil, err); got != Canceled {
			t.Errorf("Response(nil, %v) = %v, want canceled", err, got)
		}
	})
	t.Run("status codes", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/429":
				w.Header().Set("Retry-After", "3")
				w.WriteHeader(429)
			case "/503":
				w.WriteHeader(503)
			case "/challenge":
				w.Header().Set("cf-mitigated", "challenge")
				w.WriteHeader(403)
			default:
				w.WriteHeader(200)
			}
		}))
		defer srv.Close()
		for path, want := range map[string]Class{"/": Success, "/429": Throttled, "/503": Overloaded, "/challenge": Blocked} {
			resp, err := srv.Client().Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := Response(resp, err); got != want {
				t.Errorf("%s: Response = %v, want %v", path, got, want)
			}
		}
	})
}

// TestClientTimeout builds the error of an expired http.Client.Timeout in
// virtual time, against a peer that reads the request and never answers.
func TestClientTimeout(t *testing.T) {
	for _, mode := range []string{"client timeout", "context deadline"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cli, srv := net.Pipe()
				go func() {
					defer srv.Close()
					if _, err := http.ReadRequest(bufio.NewReader(srv)); err != nil {
						return
					}
					io.Copy(io.Discard, srv) // until the client gives up and closes
				}()
				tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
					return cli, nil
				}}
				defer tr.CloseIdleConnections()
				c := &http.Client{Transport: tr}
				ctx := context.Background()
				if mode == "client timeout" {
					c.Timeout = 5 * time.Second
				} else {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://origin.test/", nil)
				start := time.Now()
				_, err := c.Do(req)
				if err == nil {
					t.Fatal("no error")
				}
				if waited := time.Since(start); waited != 5*time.Second {
					t.Errorf("waited %v, want 5s", waited)
				}
				if got := Response(nil, err); got != TransportFailure {
					t.Errorf("Response(nil, %v) = %v, want transport-failure", err, got)
				}
				synctest.Wait()
			})
		})
	}
}

// A status override that is no class is no override: the status decides.
// (A Class(9) reached the controller's per-class counts and panicked with
// the scope's lock held.)
func TestInvalidStatusOverrideIgnored(t *testing.T) {
	c := &Classifier{Statuses: map[int]Class{200: Class(9), 500: Overloaded}}
	if got := c.Classify(Outcome{Status: 200}); got != Success {
		t.Errorf("200 with an invalid override: %v, want success", got)
	}
	if got := c.Classify(Outcome{Status: 500}); got != Overloaded {
		t.Errorf("a valid override: %v", got)
	}
	if Class(9).Valid() || !Canceled.Valid() {
		t.Error("Valid")
	}
}
