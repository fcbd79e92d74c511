package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/internal/endpoints"
	"github.com/eventpipe/eventpipe/internal/probe"
)

// The local cluster trusts loopback connections (no password lives anywhere)
// and listens on 127.0.0.1 only, without a Unix socket.
func (s *Stack) postgres() *component {
	url := s.cfg.Endpoints.Postgres
	c := &component{
		name:       "postgres",
		envVar:     endpoints.EnvPostgres,
		stopSignal: syscall.SIGINT, // fast shutdown: roll back clients, checkpoint, exit
	}
	pgcfg, err := pgx.ParseConfig(url)
	if err != nil {
		c.addr = url
		c.health = func(context.Context) error { return fmt.Errorf("%s: %w", endpoints.EnvPostgres, err) }
		return c
	}
	c.addr = fmt.Sprintf("%s:%d/%s", pgcfg.Host, pgcfg.Port, pgcfg.Database)
	_, _, c.managed = loopbackHostPort(fmt.Sprintf("%s:%d", pgcfg.Host, pgcfg.Port))
	// Health asks the maintenance database, which exists as soon as the
	// server accepts connections; afterStart then creates the app database.
	maint := pgcfg.Copy()
	maint.Database = "postgres"
	c.health = func(ctx context.Context) error {
		conn, err := pgx.ConnectConfig(ctx, maint)
		if err != nil {
			return fmt.Errorf("postgres connect %s:%d: %w", pgcfg.Host, pgcfg.Port, err)
		}
		defer conn.Close(context.Background())
		var one int
		return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	}
	c.afterStart = func(ctx context.Context) error {
		if err := createDatabase(ctx, maint, pgcfg.Database); err != nil {
			return err
		}
		return probe.Postgres(ctx, url)
	}
	if !c.managed {
		return c
	}
	dataDir := s.postgresDataDir()
	c.marker = dataDir
	var bin string
	var cred *syscall.Credential
	c.prepare = func(ctx context.Context) error {
		bin, err = s.postgresBinDir(ctx)
		if err != nil {
			return err
		}
		cred, err = postgresCredential()
		if err != nil {
			return err
		}
		return s.initdb(ctx, bin, dataDir, pgcfg.User, cred)
	}
	c.command = func() (*processSpec, error) {
		return &processSpec{
			path: filepath.Join(bin, "postgres"),
			args: []string{
				"-D", dataDir,
				"-p", strconv.Itoa(int(pgcfg.Port)),
				"-c", "listen_addresses=127.0.0.1",
				"-c", "unix_socket_directories=",
				"-c", "max_connections=300",
			},
			credential: cred,
		}, nil
	}
	return c
}

// postgresDataDir is Dir/data/postgres, unless the stack runs as root and
// the postgres user cannot reach that folder (a checkout under /root):
// then the cluster lives in /var/tmp/eventpipe-postgres-<hash of Dir>.
func (s *Stack) postgresDataDir() string {
	dir := s.dataDir("postgres")
	if os.Geteuid() != 0 || traversableByOthers(filepath.Dir(dir)) {
		return dir
	}
	sum := sha256.Sum256([]byte(s.cfg.Dir))
	return filepath.Join("/var/tmp", "eventpipe-postgres-"+hex.EncodeToString(sum[:6]))
}

// traversableByOthers reports whether every existing ancestor of dir lets
// other users search it.
func traversableByOthers(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if filepath.Dir(d) == d {
			return true
		}
	}
}

// postgresBinDir finds PostgreSQL's server binaries (Debian keeps them in
// /usr/lib/postgresql/<major>/bin, preferring 15), installing the Debian
// package when none is present.
func (s *Stack) postgresBinDir(ctx context.Context) (string, error) {
	find := func() string {
		if _, err := os.Stat("/usr/lib/postgresql/15/bin/postgres"); err == nil {
			return "/usr/lib/postgresql/15/bin"
		}
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
		sort.Strings(matches)
		if len(matches) > 0 {
			return filepath.Dir(matches[len(matches)-1])
		}
		if p, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p)
		}
		return ""
	}
	if dir := find(); dir != "" {
		return dir, nil
	}
	if err := s.aptInstall(ctx, "PostgreSQL server", "postgresql"); err != nil {
		return "", err
	}
	if dir := find(); dir != "" {
		return dir, nil
	}
	return "", errors.New("postgres server binary not found after installing the postgresql package")
}

// postgresCredential returns the credential the server runs under: the
// current user, or the postgres system user when running as root (the
// server refuses to run as root).
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, postgres must run as the 'postgres' user, which is missing (install the postgresql package): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// initdb creates the cluster once; the superuser is the URL's user and
// loopback connections are trusted.
func (s *Stack) initdb(ctx context.Context, bin, dataDir, superuser string, cred *syscall.Credential) error {
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	// Parents must stay searchable by the server's user; the cluster
	// folder itself is private, as postgres demands.
	if err := os.MkdirAll(filepath.Dir(dataDir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dataDir, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	if cred != nil {
		if err := os.Chown(dataDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("chown %s to postgres: %w", dataDir, err)
		}
	}
	if dataDir != s.dataDir("postgres") {
		_ = os.MkdirAll(filepath.Dir(s.dataDir("postgres")), 0o755)
		_ = os.Remove(s.dataDir("postgres"))
		_ = os.Symlink(dataDir, s.dataDir("postgres"))
	}
	if superuser == "" {
		superuser = "eventpipe"
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", dataDir, "-U", superuser, "--auth=trust", "--encoding=UTF8", "--locale=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = os.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", dataDir, err, tail(string(out), 15))
	}
	s.printf("%-14s initialised a cluster in %s", "postgres", dataDir)
	return nil
}

// createDatabase creates name unless it exists.
func createDatabase(ctx context.Context, maint *pgx.ConnConfig, name string) error {
	if name == "" || name == "postgres" {
		return nil
	}
	conn, err := pgx.ConnectConfig(ctx, maint)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}
