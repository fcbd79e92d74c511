package stack

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/probe"
)

// DynamoDB Local comes from the npm package amplify-dynamodb-simulator,
// which carries Amazon's DynamoDBLocal.jar (v1.25.1) in package/emulator/.
// The tarball is pinned by version and SHA-256.
const (
	dynamoDBPackage        = "amplify-dynamodb-simulator"
	dynamoDBPackageVersion = "2.9.30"
	dynamoDBPackageSHA256  = "3503ffac19f183407909fecdacf4db51ab1fdad1da7b2f177016670b2d80e4b9"
	defaultNPMRegistry     = "https://registry.npmjs.org"
)

func (s *Stack) dynamoDB() *component {
	ep := s.cfg.Endpoints.DynamoDB
	c := &component{
		name:       "dynamodb",
		addr:       ep,
		envVar:     endpoints.EnvDynamoDB,
		marker:     s.dataDir("dynamodb"),
		stopSignal: syscall.SIGTERM,
		health:     func(ctx context.Context) error { return probe.DynamoDB(ctx, ep) },
	}
	u, err := url.Parse(ep)
	var port string
	if err == nil && u.Scheme == "http" {
		_, port, c.managed = loopbackHostPort(u.Host)
	}
	c.prepare = func(ctx context.Context) error {
		if _, err := s.dynamoDBLocalDir(ctx); err != nil {
			return err
		}
		if _, err := s.java(ctx); err != nil {
			return err
		}
		if err := os.MkdirAll(s.dataDir("dynamodb"), 0o755); err != nil {
			return err
		}
		return s.walDynamoDBLocal(ctx)
	}
	c.afterStart = s.indexDynamoDBLocal
	c.command = func() (*processSpec, error) {
		dir, err := s.dynamoDBLocalDir(context.Background())
		if err != nil {
			return nil, err
		}
		java, err := s.java(context.Background())
		if err != nil {
			return nil, err
		}
		return &processSpec{path: java, args: append(append([]string{}, dynamoDBLocalJVMFlags...),
			"-Djava.library.path="+filepath.Join(dir, "DynamoDBLocal_lib"),
			"-jar", filepath.Join(dir, "DynamoDBLocal.jar"),
			"-port", port,
			"-dbPath", s.dataDir("dynamodb"),
			"-sharedDb",
		)}, nil
	}
	return c
}

// dynamoDBLocalJVMFlags run DynamoDB Local as the development emulator it
// is on a small machine: the serial collector instead of G1's concurrent
// threads, and only the client JIT compiler, which compiles less and
// sooner. Measured here (issue 36) on the relay's two kill and throughput
// tests, from a fresh start each: 60 CPU seconds of the JVM instead of 74,
// the tests as fast; DynamoDB Local is the largest CPU user of `make test`.
var dynamoDBLocalJVMFlags = []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}

// dynamoDBLocalIndexes are created in DynamoDB Local's SQLite database.
// Its stream-record table (us) and transaction table (tr) have no index
// but their primary key, and every write scans them: measured here, a
// TransactWriteItems took ~430 ms once ~12,000 stream records had
// accumulated (they are kept 24 h, even for deleted tables) and 12 ms with
// these indexes. GetRecords looks up a shard's trim horizon with
// MIN(SequenceNumber) WHERE ShardID = ?, which the first index cannot
// serve: every poll of an idle relay scanned the whole table (~280 ms at
// 60,000 stored records, ~2 ms with eventpipe_us_shard_seq), and appends
// that coincided with a poll waited for it. Creating an index changes no
// data and DynamoDB Local keeps serving while it is built.
//
// The last three serve the lookups DynamoDB Local makes on every request
// of a table with a stream, write or DescribeStream, on the one thread
// that runs all its SQLite work (seen in thread dumps of a `make test`
// run): the table's latest stream (sm by TableName), the stream's shards
// (ss by StreamID) and the stream's first sequence number (MIN over us
// by StreamID, which the first index serves only by reading every record
// of the stream). Measured here on one table: a PutItem took 3.2 ms at
// 2,000 stream records and 4.7 ms at 8,000 without them, 2.4 ms flat
// with them; on a suite's database the MIN took 7.7 ms for a stream of
// 12,864 records and 0.02 ms with the index.
var dynamoDBLocalIndexes = []string{
	"CREATE INDEX IF NOT EXISTS eventpipe_us_stream_shard_seq ON us (StreamID, ShardID, SequenceNumber)",
	"CREATE INDEX IF NOT EXISTS eventpipe_us_shard_seq ON us (ShardID, SequenceNumber)",
	"CREATE INDEX IF NOT EXISTS eventpipe_us_created ON us (CreationDateTime)",
	"CREATE INDEX IF NOT EXISTS eventpipe_tr_created ON tr (CreationDateTime)",
	"CREATE INDEX IF NOT EXISTS eventpipe_us_stream_seq ON us (StreamID, SequenceNumber)",
	"CREATE INDEX IF NOT EXISTS eventpipe_sm_table ON sm (TableName, CreationDateTime)",
	"CREATE INDEX IF NOT EXISTS eventpipe_ss_stream ON ss (StreamID, ShardID)",
}

// indexDynamoDBLocal adds dynamoDBLocalIndexes with the sqlite3 command
// (installed from Debian when missing and allowed). The database exists
// once DynamoDB Local has answered its first request, which the health
// check made. Without sqlite3 the stack still works, only slower.
func (s *Stack) indexDynamoDBLocal(ctx context.Context) error {
	db := s.dynamoDBLocalDB()
	if _, err := os.Stat(db); err != nil {
		return nil // not our instance, or not created yet
	}
	bin, ok := s.sqlite3(ctx, "indexes DynamoDB Local's stream tables", "without sqlite3 DynamoDB Local slows down as stream records pile up")
	if !ok {
		return nil
	}
	if err := runSQL(ctx, bin, db, strings.Join(dynamoDBLocalIndexes, ";\n")+";\n"); err != nil {
		return fmt.Errorf("index DynamoDB Local's database %s: %w", db, err)
	}
	return nil
}

// walDynamoDBLocal puts DynamoDB Local's database in SQLite's
// write-ahead-log mode before DynamoDB Local opens it, creating the (empty)
// database when there is none yet; DynamoDB Local creates its tables in
// it as in a new file, and the mode is kept in the file. In its default
// rollback-journal mode every write costs SQLite several fsyncs; with the
// log, one. Measured here with 8 concurrent writers on a loaded 2-core
// machine: 55 writes/s before, 172 after (32 writers: 69 and 226), and a
// relay's lease renewals and checkpoints, every test's appends and the
// demo all wait on those writes. A kill stays as safe: SQLite replays the
// log. Without sqlite3 the stack still works, only slower.
func (s *Stack) walDynamoDBLocal(ctx context.Context) error {
	bin, ok := s.sqlite3(ctx, "keeps DynamoDB Local's database in write-ahead-log mode", "without sqlite3 DynamoDB Local writes several times slower")
	if !ok {
		return nil
	}
	db := s.dynamoDBLocalDB()
	if err := runSQL(ctx, bin, db, "PRAGMA journal_mode=WAL;\n"); err != nil {
		return fmt.Errorf("set write-ahead-log mode on DynamoDB Local's database %s: %w", db, err)
	}
	return nil
}

// dynamoDBLocalDB is the SQLite file DynamoDB Local keeps its tables in
// (one for every client: -sharedDb).
func (s *Stack) dynamoDBLocalDB() string {
	return filepath.Join(s.dataDir("dynamodb"), "shared-local-instance.db")
}

// sqlite3 returns the sqlite3 command, installed from Debian when missing
// and allowed (why says what it is for); without it, it prints without
// and returns false.
func (s *Stack) sqlite3(ctx context.Context, why, without string) (string, bool) {
	if bin, err := exec.LookPath("sqlite3"); err == nil {
		return bin, true
	}
	if err := s.aptInstall(ctx, "sqlite3 ("+why+")", "sqlite3"); err != nil {
		s.printf("%-14s %s: %v", "dynamodb", without, err)
		return "", false
	}
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		s.printf("%-14s %s: %v", "dynamodb", without, err)
		return "", false
	}
	return bin, true
}

// runSQL runs sql on the SQLite database db with the sqlite3 command bin,
// waiting up to 10 s for a lock another connection holds.
func runSQL(ctx context.Context, bin, db, sql string) error {
	cmd := exec.CommandContext(ctx, bin, db)
	cmd.Stdin = strings.NewReader(".timeout 10000\n" + sql)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// java returns the path of a java binary, installing Debian's OpenJDK 17
// runtime when none is on PATH.
func (s *Stack) java(ctx context.Context) (string, error) {
	if p, err := exec.LookPath("java"); err == nil {
		return p, nil
	}
	if err := s.aptInstall(ctx, "java (needed by DynamoDB Local)", "openjdk-17-jre-headless"); err != nil {
		return "", err
	}
	return exec.LookPath("java")
}

// dynamoDBLocalDir returns the folder holding DynamoDBLocal.jar, fetching
// and unpacking the pinned npm tarball into ToolsDir on first use.
func (s *Stack) dynamoDBLocalDir(ctx context.Context) (string, error) {
	dir := filepath.Join(s.cfg.ToolsDir, "dynamodb-local-"+dynamoDBPackageVersion)
	if _, err := os.Stat(filepath.Join(dir, "DynamoDBLocal.jar")); err == nil {
		return dir, nil
	}
	tarball := filepath.Join(s.cfg.ToolsDir, fmt.Sprintf("%s-%s.tgz", dynamoDBPackage, dynamoDBPackageVersion))
	if err := s.fetchVerified(ctx, tarball); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(s.cfg.ToolsDir, ".unpack-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := untarPrefix(tarball, "package/emulator/", tmp); err != nil {
		return "", fmt.Errorf("unpack %s: %w", tarball, err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "DynamoDBLocal.jar")); err != nil {
		return "", fmt.Errorf("unpack %s: no package/emulator/DynamoDBLocal.jar inside", tarball)
	}
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		if _, statErr := os.Stat(filepath.Join(dir, "DynamoDBLocal.jar")); statErr != nil {
			return "", fmt.Errorf("install %s: %w", dir, err)
		}
	}
	return dir, nil
}

// fetchVerified downloads the pinned tarball to dst unless a copy with the
// right checksum is already there. The registry can be moved with
// EVENTPIPE_NPM_REGISTRY (a mirror); the checksum is checked either way.
func (s *Stack) fetchVerified(ctx context.Context, dst string) error {
	if sum, err := fileSHA256(dst); err == nil && sum == dynamoDBPackageSHA256 {
		return nil
	}
	registry := strings.TrimRight(os.Getenv("EVENTPIPE_NPM_REGISTRY"), "/")
	if registry == "" {
		registry = defaultNPMRegistry
	}
	src := fmt.Sprintf("%s/%s/-/%s-%s.tgz", registry, dynamoDBPackage, dynamoDBPackage, dynamoDBPackageVersion)
	s.printf("%-14s fetching %s", "dynamodb", src)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: %s", src, resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".download-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), resp.Body); err != nil {
		tmp.Close()
		return fmt.Errorf("download %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != dynamoDBPackageSHA256 {
		return fmt.Errorf("download %s: SHA-256 %s, want %s (pinned); refusing to use it", src, got, dynamoDBPackageSHA256)
	}
	return os.Rename(tmp.Name(), dst)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// untarPrefix extracts the regular files and folders under prefix of a
// .tgz into dst, refusing paths that would escape dst.
func untarPrefix(tgz, prefix, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !strings.HasPrefix(hdr.Name, prefix) {
			continue
		}
		rel := strings.TrimPrefix(hdr.Name, prefix)
		if rel == "" {
			continue
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if !strings.HasPrefix(target, filepath.Clean(dst)+string(os.PathSeparator)) {
			return fmt.Errorf("entry %q escapes the target folder", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode&0o755|0o644))
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		}
	}
}
