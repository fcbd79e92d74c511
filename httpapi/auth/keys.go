package auth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// maxJWKSBytes bounds a JWKS document.
const maxJWKSBytes = 1 << 20

// keyring holds the current key set and reloads it when due (due reports
// so) or when a token names an unknown kid (at most once per
// minInterval). A failed reload keeps the previous set.
type keyring struct {
	source      string
	load        func(ctx context.Context) ([]byte, error)
	due         func(loaded time.Time) bool
	minInterval time.Duration
	logger      *slog.Logger

	mu     sync.Mutex
	set    jwk.Set
	loaded time.Time // last attempt, successful or not
}

// lookup returns the key with id kid; with an empty kid, the only key of
// a set of one.
func (k *keyring) lookup(ctx context.Context, kid string) (jwk.Key, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.set == nil || k.due(k.loaded) {
		k.reload(ctx)
	}
	if k.set == nil {
		return nil, fmt.Errorf("%w: %s", ErrKeysUnavailable, k.source)
	}
	if key, ok := find(k.set, kid); ok {
		return key, nil
	}
	if time.Since(k.loaded) >= k.minInterval {
		k.reload(ctx)
		if key, ok := find(k.set, kid); ok {
			return key, nil
		}
	}
	return nil, fmt.Errorf("%w: kid %q", errUnknownKey, kid)
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

// reload loads the set, keeping the old one on failure. k.mu is held.
func (k *keyring) reload(ctx context.Context) {
	k.loaded = time.Now()
	b, err := k.load(ctx)
	if err == nil {
		var set jwk.Set
		if set, err = jwk.Parse(b); err == nil && set.Len() > 0 {
			k.set = set
			k.logger.Info("auth: signing keys loaded", "source", k.source, "keys", set.Len())
			return
		} else if err == nil {
			err = fmt.Errorf("no keys")
		}
	}
	k.logger.Warn("auth: cannot load signing keys; keeping the previous ones", "source", k.source, "err", err)
}

func fileLoader(path string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, maxJWKSBytes))
	}
}

// fileChanged reports whether the file's size or modification time
// changed since the last load (checked on every lookup).
func fileChanged(path string) func(time.Time) bool {
	var last struct {
		size int64
		mod  time.Time
	}
	return func(time.Time) bool {
		fi, err := os.Stat(path)
		if err != nil {
			return false
		}
		if fi.Size() == last.size && fi.ModTime().Equal(last.mod) {
			return false
		}
		last.size, last.mod = fi.Size(), fi.ModTime()
		return true
	}
}

func urlLoader(client *http.Client, url string) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
	}
}

func olderThan(d time.Duration) func(time.Time) bool {
	return func(loaded time.Time) bool { return time.Since(loaded) >= d }
}
