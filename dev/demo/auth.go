package demo

import "net/http"

// bearer adds the demo's token to every request to the HTTP API (and to
// no other address, such as the relay's metrics).
type bearer struct {
	apiHost, token string
	next           http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != b.apiHost || req.Header.Get("Authorization") != "" {
		return b.next.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change its request
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

// apiClient is the demo's HTTP client: with Config.AuthToken it sends the
// token to the API.
func apiClient(cfg Config) *http.Client {
	c := &http.Client{Timeout: httpTimeout}
	if cfg.AuthToken != "" {
		c.Transport = bearer{apiHost: cfg.Endpoints.HTTPAddr, token: cfg.AuthToken, next: http.DefaultTransport}
	}
	return c
}
