package stack

import (
	"context"
	"net/url"
	"os"
	"syscall"

	"github.com/eventpipe/eventpipe/internal/endpoints"
	"github.com/eventpipe/eventpipe/internal/probe"
)

// elasticsearch is the stack's Elasticsearch-API server (internal/esserver,
// inside the eventpipe binary): Elasticsearch itself cannot be installed on
// these machines. A non-loopback ELASTICSEARCH_URL (a real Elasticsearch 8,
// e.g. docker-compose's) is external and left alone.
func (s *Stack) elasticsearch() *component {
	ep := s.cfg.Endpoints.Elasticsearch
	c := &component{
		name:       "elasticsearch",
		addr:       ep,
		envVar:     endpoints.EnvElasticsearch,
		marker:     s.dataDir("elasticsearch"),
		stopSignal: syscall.SIGTERM,
		health:     func(ctx context.Context) error { return probe.Elasticsearch(ctx, ep) },
	}
	u, err := url.Parse(ep)
	if err != nil || u.Scheme != "http" {
		return c // external (or unusable): health says why
	}
	host, _, loopback := loopbackHostPort(u.Host)
	c.managed = loopback && host == "127.0.0.1"
	c.prepare = func(context.Context) error { return os.MkdirAll(s.dataDir("elasticsearch"), 0o755) }
	c.command = func() (*processSpec, error) {
		args := append([]string{}, s.cfg.ESServerCommand[1:]...)
		args = append(args, "--addr", u.Host, "--data-dir", s.dataDir("elasticsearch"))
		return &processSpec{path: s.cfg.ESServerCommand[0], args: args, env: s.cfg.ESServerEnv}, nil
	}
	return c
}
