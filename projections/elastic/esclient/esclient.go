// Package esclient holds what every eventpipe use of go-elasticsearch
// shares: the client of an address, one call that turns an error answer
// into a typed error, and that error. It depends on nothing else of
// eventpipe, so that code which only reads an index (an HTTP API) does not
// pull in the consumers.
//
// The client is built from go-elasticsearch's esapi (the request types)
// and elastic-transport-go (connections, authentication, retries), not
// from the root package github.com/elastic/go-elasticsearch/v8: that
// package also defines NewTypedClient and so links the whole typed API,
// some 800 packages eventpipe never calls (issue 36). The official
// client is those same two parts; Client keeps its behaviour that
// matters here: the settings of Security, its retries and its product
// check.
package esclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// DefaultURL is the Elasticsearch NewClient talks to when given no URL
// and ELASTICSEARCH_URL is not set either: loopback, as every eventpipe
// address by default (the official client says localhost).
const DefaultURL = "http://127.0.0.1:9200"

// ErrNotElasticsearch is the error of a request whose successful answer
// lacks the header X-Elastic-Product: Elasticsearch, that is, a server
// that is not Elasticsearch 8 (or the stack's Elasticsearch-API server,
// which sends it). Client checks the first successful answer, as the
// official client does, so that a proxy or another product answering 2xx
// is not mistaken for Elasticsearch.
var ErrNotElasticsearch = errors.New("the server is not Elasticsearch: its answer lacks the header X-Elastic-Product: Elasticsearch")

// userAgent names the client in every request's User-Agent header.
var userAgent = fmt.Sprintf("eventpipe-esclient go-elasticsearch-esapi/%s (%s %s; %s)",
	esapi.Version, runtime.GOOS, runtime.GOARCH, runtime.Version())

// Client is an Elasticsearch client: go-elasticsearch's functional API
// (es.Search(...), es.Indices.Create(...), …) over elastic-transport-go.
// It is what elasticsearch.Client of the root go-elasticsearch package is
// made of, without linking that package and with it the typed API (about
// 800 packages). A Client is an esapi.Transport, so req.Do(ctx, es) and
// Do(ctx, es, req, out) work with it. It is safe for concurrent use.
type Client struct {
	// API is go-elasticsearch's functional API, sending through the
	// Client itself.
	*esapi.API

	url            string
	transport      *elastictransport.Client
	productChecked atomic.Bool
}

// NewClient returns a client of the Elasticsearch at url (a real
// Elasticsearch 8, or the stack's Elasticsearch-API server) that
// authenticates and verifies the server as sec says. It does not connect.
// An empty url means ELASTICSEARCH_URL (comma-separated URLs), else
// DefaultURL, as with the official client. Credentials in the URL
// (https://user:password@host) are sent as basic auth, before sec's.
// Credentials over http:// to a host that is not loopback are refused
// (Security.ValidateFor).
func NewClient(url string, sec Security) (*Client, error) {
	c, err := newClient(url, sec)
	if err != nil {
		return nil, fmt.Errorf("elasticsearch client for %s: %w", redact(url), err)
	}
	return c, nil
}

// redact hides a password in raw, for an error message.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

func newClient(rawURL string, sec Security) (*Client, error) {
	if err := sec.ValidateFor(rawURL); err != nil {
		return nil, err
	}
	urls, err := parseURLs(rawURL)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := sec.TLS.Build()
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		transport.TLSClientConfig = tlsCfg
	}
	// elastictransport sends the API key (APIKey …) or else the basic
	// credentials, and with a fingerprint dials TLS itself, accepting a
	// server whose chain holds a certificate of that SHA-256; otherwise
	// the transport's TLS configuration verifies the server. Unset retry
	// settings mean its defaults: up to 3 retries of a network error or a
	// 502, 503 or 504.
	tp, err := elastictransport.New(elastictransport.Config{
		UserAgent:              userAgent,
		URLs:                   urls,
		APIKey:                 sec.APIKey,
		Username:               sec.Username,
		Password:               sec.Password,
		CertificateFingerprint: sec.Fingerprint,
		Transport:              transport,
	})
	if err != nil {
		return nil, err
	}
	c := &Client{url: urls[0].Redacted(), transport: tp}
	c.API = esapi.New(c)
	return c, nil
}

// parseURLs is the node URLs of raw: itself, or when empty the
// comma-separated ELASTICSEARCH_URL, or DefaultURL.
func parseURLs(raw string) ([]*url.URL, error) {
	addrs := []string{raw}
	if raw == "" {
		addrs = []string{DefaultURL}
		if env := os.Getenv("ELASTICSEARCH_URL"); strings.TrimSpace(env) != "" {
			addrs = strings.Split(env, ",")
		}
	}
	urls := make([]*url.URL, 0, len(addrs))
	for _, a := range addrs {
		u, err := url.Parse(strings.TrimRight(strings.TrimSpace(a), "/"))
		if err != nil {
			return nil, fmt.Errorf("cannot parse url: %w", err)
		}
		urls = append(urls, u)
	}
	return urls, nil
}

// Perform sends req to Elasticsearch (the esapi.Transport method every
// esapi request is sent with): elastic-transport-go sets the node's
// address, the credentials and the User-Agent and retries as configured.
// Until one has passed, each successful (2xx) answer is checked for the
// header X-Elastic-Product: Elasticsearch; one without it is closed and
// becomes ErrNotElasticsearch. Error answers are returned as they are,
// as Elasticsearch sends them.
func (c *Client) Perform(req *http.Request) (*http.Response, error) {
	res, err := c.transport.Perform(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 && !c.productChecked.Load() {
		if got := res.Header.Get("X-Elastic-Product"); got != "Elasticsearch" {
			res.Body.Close()
			return nil, fmt.Errorf("elasticsearch %s: %w (X-Elastic-Product is %q)", c.url, ErrNotElasticsearch, got)
		}
		c.productChecked.Store(true)
	}
	return res, nil
}

// ResponseError is an error answer of Elasticsearch: its HTTP status and
// the type and reason of its error object.
type ResponseError struct {
	Status int
	Type   string
	Reason string
}

// Error describes the answer as "elasticsearch <status> <type>: <reason>".
func (e *ResponseError) Error() string {
	return fmt.Sprintf("elasticsearch %d %s: %s", e.Status, e.Type, e.Reason)
}

// Permanent reports whether a retry cannot help: a request Elasticsearch
// refuses as malformed (400), as opposed to a missing index, a block or
// an unavailable node.
func (e *ResponseError) Permanent() bool { return e.Status == http.StatusBadRequest }

// IsNotFound reports whether err is Elasticsearch's 404 (a missing index,
// alias or document).
func IsNotFound(err error) bool {
	var re *ResponseError
	return errors.As(err, &re) && re.Status == http.StatusNotFound
}

// IsConflict reports whether err is Elasticsearch's 409 (a version
// conflict, or a document or index that already exists).
func IsConflict(err error) bool {
	var re *ResponseError
	return errors.As(err, &re) && re.Status == http.StatusConflict
}

// ErrorBody is the error object of an Elasticsearch answer (also of a
// _bulk or _mget item).
type ErrorBody struct {
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// Do sends req and decodes a 2xx answer's body into out (when not nil);
// any other answer becomes a *ResponseError.
func Do(ctx context.Context, es esapi.Transport, req esapi.Request, out any) error {
	res, err := req.Do(ctx, es)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if res.IsError() {
		return responseError(res.StatusCode, body)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// responseError builds the *ResponseError of an error answer.
func responseError(status int, body []byte) *ResponseError {
	var eb struct {
		Error json.RawMessage `json:"error"`
	}
	re := &ResponseError{Status: status, Type: http.StatusText(status)}
	if json.Unmarshal(body, &eb) != nil || len(eb.Error) == 0 {
		re.Reason = string(bytes.TrimSpace(body))
		return re
	}
	var obj ErrorBody
	if json.Unmarshal(eb.Error, &obj) == nil && obj.Type != "" {
		re.Type, re.Reason = obj.Type, obj.Reason
		return re
	}
	var s string
	if json.Unmarshal(eb.Error, &s) == nil {
		re.Reason = s
	}
	return re
}

// PathSegment escapes s as one segment of a request path. esapi writes a
// request's DocumentID (and Index) into the URL's path as it is given, so
// a document id such as "x?refresh=true" would end the path and add a
// query parameter, and "a/b" would add a segment: every DocumentID
// eventpipe sends goes through PathSegment, and Elasticsearch decodes it
// back to the one id.
func PathSegment(s string) string { return url.PathEscape(s) }

// JSONBody encodes v (a map or struct of the caller's) as a request body.
func JSONBody(v any) io.Reader {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("esclient: encode request body: %v", err)) // only our own maps and structs
	}
	return bytes.NewReader(b)
}
