package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/eventpipe/eventpipe/internal/pause"
)

// firstBackoff is the pause after a first failed load; it doubles with
// each failure up to MinRefreshInterval.
const firstBackoff = time.Second

// keySource loads a key set document and says which version of it was
// read ("" when the source has no versions), and whether the version
// seen at the last load is no longer the current one.
type keySource struct {
	load    func(ctx context.Context) (doc []byte, version string, err error)
	changed func(version string) bool
}

// keyring holds the current key set and loads it again in the
// background: when it is stale (the refresh interval passed, or the file
// changed), or when a token names an unknown kid (at most once per
// minInterval). One load runs at a time, on its own context bounded by
// the fetch timeout, never on a request's; failed loads are retried with
// backoff and keep the previous set. A lookup of a known kid never waits
// for a load; a lookup of an unknown kid (or before the first load) may
// wait for the running one, as long as its own context lets it.
type keyring struct {
	source      string
	src         keySource
	refresh     time.Duration // 0: only when the source changed
	minInterval time.Duration
	timeout     time.Duration
	logger      *slog.Logger

	mu        sync.Mutex
	set       jwk.Set       // nil until the first successful load
	loadedAt  time.Time     // of the last successful load
	version   string        // of the source at the last load that read it
	attempt   time.Time     // when the last load started
	failures  int           // consecutive failed loads
	notBefore time.Time     // no load starts before (backoff)
	running   chan struct{} // closed when the running load ends; nil when none runs
}

func newKeyring(cfg Config, source string, src keySource) *keyring {
	k := &keyring{source: source, src: src, minInterval: cfg.MinRefreshInterval, timeout: cfg.FetchTimeout, logger: cfg.Logger}
	if cfg.JWKSFile == "" {
		k.refresh = cfg.RefreshInterval
	}
	return k
}

// lookup returns the key with id kid; with an empty kid, the only key of
// a set of one. It wraps ErrKeysUnavailable while no set was ever
// loaded, and errUnknownKey when the set has no such key.
func (k *keyring) lookup(ctx context.Context, kid string) (jwk.Key, error) {
	k.mu.Lock()
	now := time.Now()
	stale := k.staleLocked(now)
	if k.set != nil {
		if key, ok := find(k.set, kid); ok {
			if stale {
				k.startLocked(now) // in the background: this request does not wait
			}
			k.mu.Unlock()
			return key, nil
		}
	}
	wait := k.running
	if stale || now.Sub(k.attempt) >= k.minInterval {
		wait = k.startLocked(now)
	}
	k.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done(): // the load goes on without this request
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.set == nil {
		return nil, fmt.Errorf("%w: %s", ErrKeysUnavailable, k.source)
	}
	if key, ok := find(k.set, kid); ok {
		return key, nil
	}
	return nil, fmt.Errorf("%w: kid %q", errUnknownKey, kid)
}

// staleLocked reports whether the set is due to be loaded again. k.mu
// is held.
func (k *keyring) staleLocked(now time.Time) bool {
	switch {
	case k.set == nil:
		return true
	case k.src.changed != nil && k.src.changed(k.version):
		return true
	}
	return k.refresh > 0 && now.Sub(k.loadedAt) >= k.refresh
}

// startLocked starts a load unless one runs (whose channel it returns)
// or the backoff after failed loads forbids it (nil). k.mu is held.
func (k *keyring) startLocked(now time.Time) chan struct{} {
	if k.running != nil {
		return k.running
	}
	if now.Before(k.notBefore) {
		return nil
	}
	done := make(chan struct{})
	k.running, k.attempt = done, now
	go k.reload(done)
	return done
}

// reload loads the set and, when it parses, replaces the current one
// with it, even when it has fewer keys or none (keys removed from the
// source stop verifying); on failure it keeps the current set and backs
// off. It closes done when it ends.
func (k *keyring) reload(done chan struct{}) {
	defer close(done)
	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	defer cancel()
	doc, version, err := k.src.load(ctx)
	var set jwk.Set
	if err == nil {
		set, err = jwk.Parse(doc)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running = nil
	if version != "" {
		k.version = version // a document that does not parse is not read again until it changes
	}
	if err != nil {
		k.failures++
		wait := pause.Jittered(pause.Backoff(k.failures, firstBackoff, max(k.minInterval, firstBackoff)))
		k.notBefore = time.Now().Add(wait)
		k.logger.Warn("auth: cannot load signing keys; keeping the previous ones", "source", k.source, "err", err, "failures", k.failures, "retry_after", wait.Round(time.Millisecond))
		return
	}
	k.set, k.loadedAt, k.failures, k.notBefore = set, time.Now(), 0, time.Time{}
	if set.Len() == 0 {
		k.logger.Warn("auth: the signing key set is empty: every token is refused", "source", k.source)
		return
	}
	k.logger.Info("auth: signing keys loaded", "source", k.source, "keys", set.Len())
}

func find(set jwk.Set, kid string) (jwk.Key, bool) {
	if kid == "" {
		if set.Len() == 1 {
			return set.Key(0)
		}
		return nil, false
	}
	return set.LookupKeyID(kid)
}

// fileSource reads path; its version is its size and modification time.
func fileSource(path string) keySource {
	stat := func() string {
		fi, err := os.Stat(path)
		if err != nil {
			return ""
		}
		return fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
	}
	return keySource{
		load: func(context.Context) ([]byte, string, error) {
			version := stat()
			f, err := os.Open(path)
			if err != nil {
				return nil, "", err
			}
			defer f.Close()
			doc, err := readLimited(f)
			return doc, version, err
		},
		changed: func(version string) bool {
			v := stat()
			return v != "" && v != version
		},
	}
}

// errRedirect refuses every redirect of a JWKS fetch.
var errRedirect = errors.New("redirects are not followed")

// urlSource GETs url with a copy of client that follows no redirects.
func urlSource(client *http.Client, url string) keySource {
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return errRedirect }
	return keySource{load: func(ctx context.Context) ([]byte, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, "", err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, "", fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		doc, err := readLimited(resp.Body)
		return doc, "", err
	}}
}

// readLimited reads r to its end, refusing more than MaxJWKSBytes.
func readLimited(r io.Reader) ([]byte, error) {
	doc, err := io.ReadAll(io.LimitReader(r, MaxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(doc) > MaxJWKSBytes {
		return nil, fmt.Errorf("the key set is larger than %d bytes", MaxJWKSBytes)
	}
	return doc, nil
}
