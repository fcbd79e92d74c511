package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
)

// HeaderRequestID is the response header that carries a request's
// correlation id: the Server sets it on every answer, a 5xx body repeats
// it (Error.RequestID), and the server's log line of the failure names it
// (request_id), so a client's report finds the full error.
const HeaderRequestID = "X-Request-Id"

// requestKey is the context key of the request's requestInfo.
type requestKey struct{}

// requestInfo is what the Server's handler gives each request.
type requestInfo struct {
	id     string
	logger *slog.Logger
}

// newRequestID returns a random correlation id (16 hex digits). It never
// comes from the client, so it cannot forge or collide with another's.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// withRequest gives r a fresh correlation id, set on w's header and in
// r's context with the logger of WriteServerError.
func withRequest(w http.ResponseWriter, r *http.Request, logger *slog.Logger) *http.Request {
	info := requestInfo{id: newRequestID(), logger: logger}
	w.Header().Set(HeaderRequestID, info.id)
	return r.WithContext(context.WithValue(r.Context(), requestKey{}, info))
}

// RequestID returns the correlation id the Server gave the request of
// ctx, "" outside a Server's handler.
func RequestID(ctx context.Context) string {
	info, _ := ctx.Value(requestKey{}).(requestInfo)
	return info.id
}

// WriteServerError answers a failure of the server or of a backend
// (DynamoDB, Postgres, Elasticsearch, Kafka) with status (a 5xx) and
// code: the body's message is generic and names the request's
// correlation id (also in the body's requestId and the X-Request-Id
// header), never err's text, which may carry a backend's table names,
// addresses or messages; err is logged in full at error level with the
// id, method, path, status and code (on the Server's Logger; slog.Default
// outside a Server, with an id made here).
func WriteServerError(w http.ResponseWriter, r *http.Request, status int, code string, err error) {
	info, ok := r.Context().Value(requestKey{}).(requestInfo)
	if !ok {
		info = requestInfo{id: newRequestID(), logger: slog.Default()}
		w.Header().Set(HeaderRequestID, info.id)
	}
	info.logger.ErrorContext(r.Context(), "request failed", "request_id", info.id, "method", r.Method, "path", r.URL.Path,
		"status", status, "code", code, "err", err)
	WriteJSON(w, status, Error{Code: code, Message: ServerErrorMessage(status, info.id), RequestID: info.id})
}

// ServerErrorMessage is the generic message of a 5xx answer to the
// request of correlation id id.
func ServerErrorMessage(status int, id string) string {
	if status == http.StatusServiceUnavailable {
		return fmt.Sprintf("the service cannot answer now; retry later (request %s; the server's log has the cause)", id)
	}
	return fmt.Sprintf("%s (request %s; the server's log has the cause)", http.StatusText(status), id)
}
