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
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/probe"
)

// The local cluster listens on 127.0.0.1 only and always serves TLS with
// the stack's server certificate (secure/server.pem), so TLS clients can
// verify-full in every mode. Its pg_hba is generated (postgresHBA) and
// passed with -c hba_file, so switching modes is a restart:
//
//   - plain mode trusts loopback TCP connections, with or without TLS (no
//     password lives anywhere), and has no Unix socket;
//   - secure mode accepts TCP connections only over TLS with a
//     scram-sha-256 password (secure/postgres-password, set on the URL's
//     role), and serves a Unix socket in a folder only the server's user
//     can enter, which the stack uses for maintenance (trusted).
//
// In both modes the role PostgresTLSRole may log in only over TLS with
// that password.
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
	secure := s.cfg.Secure && c.managed
	files := secureFiles(s.cfg.Dir)
	dataDir := s.postgresDataDir()
	confDir := dataDir + "-conf"
	sockDir := postgresSocketDir(confDir, pgcfg.Port)
	// Health asks the maintenance database, which exists as soon as the
	// server accepts connections; afterStart then creates the app database.
	maint := pgcfg.Copy()
	maint.Database = "postgres"
	if secure {
		// Maintenance goes through the Unix socket (trusted); health
		// connects as clients do: TLS verify-full and the password.
		maint.Host, maint.Port, maint.TLSConfig, maint.Fallbacks = sockDir, pgcfg.Port, nil, nil
		c.ready = func(ctx context.Context) error { return pingPostgres(ctx, maint) }
		c.health = func(ctx context.Context) error {
			cfg, err := securePostgresConfig(url, files, "postgres")
			if err != nil {
				return err
			}
			return pingPostgres(ctx, cfg)
		}
	} else {
		c.health = func(ctx context.Context) error { return pingPostgres(ctx, maint) }
	}
	c.afterStart = func(ctx context.Context) error {
		if err := createDatabase(ctx, maint, pgcfg.Database); err != nil {
			return err
		}
		// The roles are the cluster owner's business: a URL naming the
		// TLS role (a client of the stack, as in tests) cannot manage
		// them, and they were set up when the stack started.
		if c.managed && pgcfg.User != PostgresTLSRole {
			if err := s.postgresRoles(ctx, maint, pgcfg.User, pgcfg.Database, files, secure); err != nil {
				return err
			}
		}
		if secure {
			cfg, err := securePostgresConfig(url, files, pgcfg.Database)
			if err != nil {
				return err
			}
			return pingPostgres(ctx, cfg)
		}
		return probe.Postgres(ctx, url)
	}
	if !c.managed {
		return c
	}
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
		if err := s.initdb(ctx, bin, dataDir, pgcfg.User, cred); err != nil {
			return err
		}
		return writePostgresConf(confDir, sockDir, files, secure, cred)
	}
	c.command = func() (*processSpec, error) {
		args := []string{
			"-D", dataDir,
			"-p", strconv.Itoa(int(pgcfg.Port)),
			"-c", "listen_addresses=127.0.0.1",
			"-c", "max_connections=300",
			"-c", "ssl=on",
			"-c", "ssl_cert_file=" + filepath.Join(confDir, "server.crt"),
			"-c", "ssl_key_file=" + filepath.Join(confDir, "server.key"),
			"-c", "hba_file=" + filepath.Join(confDir, "pg_hba.conf"),
			"-c", "password_encryption=scram-sha-256",
		}
		if secure {
			args = append(args, "-c", "unix_socket_directories="+sockDir, "-c", "unix_socket_permissions=0700")
		} else {
			args = append(args, "-c", "unix_socket_directories=")
		}
		return &processSpec{path: filepath.Join(bin, "postgres"), args: args, credential: cred}, nil
	}
	return c
}

// pingPostgres connects with cfg and runs SELECT 1.
func pingPostgres(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres connect %s:%d as %s: %w", cfg.Host, cfg.Port, cfg.User, err)
	}
	defer conn.Close(context.Background())
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// securePostgresConfig is how clients reach the secured Postgres:
// sslmode=verify-full against the stack's CA, with the password of
// secure/postgres-password, connected to database db.
func securePostgresConfig(rawURL string, files SecureFiles, db string) (*pgx.ConnConfig, error) {
	u, err := securePostgresURL(rawURL, files.CA)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, fmt.Errorf("stack: secure postgres URL: %w", err)
	}
	if cfg.Password, err = readSecret(files.PostgresPassword); err != nil {
		return nil, err
	}
	cfg.Database = db
	return cfg, nil
}

// postgresSocketDir is where the secured server puts its Unix socket:
// confDir, unless the socket's path would pass the 107 bytes a socket
// address holds; then a folder under /tmp named after confDir.
func postgresSocketDir(confDir string, port uint16) string {
	if len(filepath.Join(confDir, fmt.Sprintf(".s.PGSQL.%d", port))) < 100 {
		return confDir
	}
	sum := sha256.Sum256([]byte(confDir))
	return filepath.Join(os.TempDir(), "eventpipe-pg-"+hex.EncodeToString(sum[:6]))
}

// postgresHBA is the cluster's pg_hba.conf. Plain mode keeps what
// `initdb --auth=trust` writes (trust on loopback); secure mode demands
// TLS and scram-sha-256 on TCP. Either way PostgresTLSRole comes first:
// TLS and password only.
func postgresHBA(secure bool) string {
	var b strings.Builder
	b.WriteString("# Generated by eventpipe stack (" + modeName(secure) + " mode); rewritten at every start.\n")
	b.WriteString("# TYPE  DATABASE  USER  ADDRESS  METHOD\n")
	fmt.Fprintf(&b, "hostssl all %[1]s 127.0.0.1/32 scram-sha-256\nhostssl all %[1]s ::1/128 scram-sha-256\nhost all %[1]s all reject\nlocal all %[1]s reject\n", PostgresTLSRole)
	if secure {
		b.WriteString("local all all trust\n")
		b.WriteString("hostssl all all 127.0.0.1/32 scram-sha-256\nhostssl all all ::1/128 scram-sha-256\n")
		b.WriteString("hostssl replication all 127.0.0.1/32 scram-sha-256\nhostssl replication all ::1/128 scram-sha-256\n")
		b.WriteString("host all all all reject\nhost replication all all reject\n")
		return b.String()
	}
	b.WriteString("local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n")
	b.WriteString("local replication all trust\nhost replication all 127.0.0.1/32 trust\nhost replication all ::1/128 trust\n")
	return b.String()
}

// writePostgresConf fills confDir (0700, owned by the server's user) with
// copies of the stack's server certificate and key, which postgres wants
// owned by its user and private, and the pg_hba.conf of the mode; it
// creates the socket folder when that lies elsewhere.
func writePostgresConf(confDir, sockDir string, files SecureFiles, secure bool, cred *syscall.Credential) error {
	certPEM, err := os.ReadFile(files.ServerCert)
	if err != nil {
		return fmt.Errorf("postgres TLS: %w", err)
	}
	keyPEM, err := os.ReadFile(files.ServerKey)
	if err != nil {
		return fmt.Errorf("postgres TLS: %w", err)
	}
	for _, dir := range []string{confDir, sockDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
		if cred != nil {
			if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
				return fmt.Errorf("chown %s to postgres: %w", dir, err)
			}
		}
	}
	for name, content := range map[string][]byte{"server.crt": certPEM, "server.key": keyPEM, "pg_hba.conf": []byte(postgresHBA(secure))} {
		path := filepath.Join(confDir, name)
		if err := writeSecret(path, string(content)); err != nil {
			return err
		}
		if cred != nil {
			if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
				return fmt.Errorf("chown %s to postgres: %w", path, err)
			}
		}
	}
	return nil
}

// postgresRoles gives the roles their passwords over the maintenance
// connection: in secure mode the URL's role (the cluster's superuser)
// gets secure/postgres-password; in every mode PostgresTLSRole exists
// with that password, as a member of the URL's role with every right on
// its database. Passwords travel as SCRAM verifiers, never in clear.
func (s *Stack) postgresRoles(ctx context.Context, maint *pgx.ConnConfig, user, db string, files SecureFiles, secure bool) error {
	pw, err := readSecret(files.PostgresPassword)
	if err != nil {
		return err
	}
	if user == "" {
		user = "eventpipe"
	}
	conn, err := pgx.ConnectConfig(ctx, maint)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	setPassword := func(role string) error {
		verifier, err := scramSHA256Verifier(pw)
		if err != nil {
			return err
		}
		// A verifier is base64 and $ : only, safe in a literal.
		if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD '"+verifier+"'"); err != nil {
			return fmt.Errorf("set the password of role %s: %w", role, err)
		}
		return nil
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", PostgresTLSRole).Scan(&exists); err != nil {
		return fmt.Errorf("look up role %s: %w", PostgresTLSRole, err)
	}
	tlsRole, owner := pgx.Identifier{PostgresTLSRole}.Sanitize(), pgx.Identifier{user}.Sanitize()
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE ROLE "+tlsRole+" LOGIN"); err != nil {
			return fmt.Errorf("create role %s: %w", PostgresTLSRole, err)
		}
	}
	if err := setPassword(PostgresTLSRole); err != nil {
		return err
	}
	var member bool
	if err := conn.QueryRow(ctx, "SELECT pg_has_role($1, $2, 'MEMBER')", PostgresTLSRole, user).Scan(&member); err != nil {
		return fmt.Errorf("look up role %s: %w", PostgresTLSRole, err)
	}
	if !member {
		if _, err := conn.Exec(ctx, "GRANT "+owner+" TO "+tlsRole); err != nil {
			return fmt.Errorf("grant %s to %s: %w", user, PostgresTLSRole, err)
		}
	}
	if db != "" && db != "postgres" {
		if _, err := conn.Exec(ctx, "GRANT ALL ON DATABASE "+pgx.Identifier{db}.Sanitize()+" TO "+tlsRole); err != nil {
			return fmt.Errorf("grant database %s to %s: %w", db, PostgresTLSRole, err)
		}
	}
	if secure {
		return setPassword(user)
	}
	return nil
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
