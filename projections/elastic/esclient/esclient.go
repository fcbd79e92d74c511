// Package esclient holds what every eventpipe use of go-elasticsearch
// shares: the client of an address, one call that turns an error answer
// into a typed error, and that error. It depends on nothing else of
// eventpipe, so that code which only reads an index (an HTTP API) does not
// pull in the consumers.
package esclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// NewClient returns a go-elasticsearch client of the Elasticsearch at url
// (a real Elasticsearch 8, or the stack's Elasticsearch-API server) that
// authenticates and verifies the server as sec says.
func NewClient(url string, sec Security) (*elasticsearch.Client, error) {
	if err := sec.Validate(); err != nil {
		return nil, fmt.Errorf("elasticsearch client for %s: %w", url, err)
	}
	tlsCfg, err := sec.TLS.Build()
	if err != nil {
		return nil, fmt.Errorf("elasticsearch client for %s: %w", url, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		transport.TLSClientConfig = tlsCfg
	}
	c, err := elasticsearch.NewClient(elasticsearch.Config{
		Addresses:              []string{url},
		APIKey:                 sec.APIKey,
		Username:               sec.Username,
		Password:               sec.Password,
		CertificateFingerprint: sec.Fingerprint,
		Transport:              transport,
	})
	if err != nil {
		return nil, fmt.Errorf("elasticsearch client for %s: %w", url, err)
	}
	return c, nil
}

// ResponseError is an error answer of Elasticsearch: its HTTP status and
// the type and reason of its error object.
type ResponseError struct {
	Status int
	Type   string
	Reason string
}

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

// do sends req and decodes a 2xx answer's body into out (when not nil);
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

// JSONBody encodes v (a map or struct of the caller's) as a request body.
func JSONBody(v any) io.Reader {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("esclient: encode request body: %v", err)) // only our own maps and structs
	}
	return bytes.NewReader(b)
}
