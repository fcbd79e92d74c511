package rollups

import (
	"bytes"
	"io"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
)

// createFile is the name of a roll-up's one migration.
const createFile = "001_create.sql"

// createTable returns the migrations of a roll-up whose table is table:
// 001_create.sql, which creates it. Each bucket is a row per measure:
// measures are whatever Measure names, so they cannot be columns.
func createTable(table string) fs.FS {
	t := pgx.Identifier{table}.Sanitize()
	sql := `-- A roll-up: per period, the sum of each measure in each bucket (its start, UTC).
CREATE TABLE ` + t + ` (
    period  text        NOT NULL CHECK (period IN ('hourly', 'daily')),
    bucket  timestamptz NOT NULL,
    measure text        NOT NULL,
    value   bigint      NOT NULL,
    PRIMARY KEY (period, bucket, measure)
);

---- create above / drop below ----

DROP TABLE ` + t + `;
`
	return oneFileFS{name: createFile, data: []byte(sql)}
}

// oneFileFS is a read-only fs.FS of one file in its root directory: the
// generated migration of a roll-up, in the form tern reads.
type oneFileFS struct {
	name string
	data []byte
}

// Open implements fs.FS.
func (f oneFileFS) Open(name string) (fs.File, error) {
	switch {
	case !fs.ValidPath(name):
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	case name == ".":
		return &rootDir{fsys: f}, nil
	case name == f.name:
		return openFile{Reader: bytes.NewReader(f.data), info: f.info()}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadDir implements fs.ReadDirFS.
func (f oneFileFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return []fs.DirEntry{fs.FileInfoToDirEntry(f.info())}, nil
}

func (f oneFileFS) info() fileInfo { return fileInfo{name: f.name, size: int64(len(f.data))} }

// fileInfo describes the file (mode 0444) or the root directory.
type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }
func (i fileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

// openFile is the file, open.
type openFile struct {
	*bytes.Reader
	info fileInfo
}

func (o openFile) Stat() (fs.FileInfo, error) { return o.info, nil }
func (o openFile) Close() error               { return nil }

// rootDir is the root directory, open: its one entry is read once.
type rootDir struct {
	fsys oneFileFS
	read bool
}

func (d *rootDir) Stat() (fs.FileInfo, error) { return fileInfo{name: ".", dir: true}, nil }
func (d *rootDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: fs.ErrInvalid}
}
func (d *rootDir) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *rootDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if d.read {
		if n > 0 {
			return nil, io.EOF
		}
		return nil, nil
	}
	d.read = true
	return []fs.DirEntry{fs.FileInfoToDirEntry(d.fsys.info())}, nil
}
