package eventpipe_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The house's floors, as docs/architecture.md's map of packages names
// them. Each package sits on one; what it may import (outside its tests)
// follows from the floor.
const (
	floorLibrary  = "library"  // anyone may import it; it imports only the library and internal/
	floorRoot     = "root"     // the composition root: imports the library and internal/
	floorTools    = "tools"    // built on the root (the operator's tools, the one-process pipeline): the root, the library, internal/
	floorExample  = "example"  // a user's module in miniature: the tools, the root, the library
	floorInternal = "internal" // small helpers beside the library: the library and internal/
	floorDev      = "dev"      // the development stack: anything but cmd/; no library package imports it
	floorCmd      = "cmd"      // programs: anything; nothing imports them
)

// mayImport is, per floor, the floors its packages may import.
var mayImport = map[string][]string{
	floorLibrary:  {floorLibrary, floorInternal},
	floorRoot:     {floorLibrary, floorInternal},
	floorTools:    {floorRoot, floorLibrary, floorInternal},
	floorExample:  {floorTools, floorRoot, floorLibrary, floorInternal},
	floorInternal: {floorLibrary, floorInternal},
	floorDev:      {floorDev, floorRoot, floorTools, floorLibrary, floorInternal},
	floorCmd:      {floorCmd, floorDev, floorRoot, floorTools, floorLibrary, floorInternal},
}

const (
	module              = "github.com/eventpipe/eventpipe"
	maxRootFiles        = 16
	maxInternalLines    = 3000
	architectureDoc     = "docs/architecture.md"
	mapHeading          = "## The map of packages"
	kafkaClientsOutside = "bus/kafka, its subpackages and dev/kafkabroker"
)

// kafkaClient reports whether an import path is one of the Kafka client
// libraries, which only bus/kafka (and the local broker) may use.
func kafkaClient(path string) bool {
	return strings.HasPrefix(path, "github.com/IBM/sarama") || strings.HasPrefix(path, "github.com/twmb/franz-go")
}

// linkedOnlyFrom names the libraries only programs need (the OTLP
// exporter with its gRPC and protobuf, the Elasticsearch-API server's
// bleve, the stack KMS's Local KMS), with the one package each may be imported from: every other
// package, and so every test binary but theirs, links without them.
// Linking is a large part of `make test` (issue 36).
var linkedOnlyFrom = map[string]string{
	"go.opentelemetry.io/otel/exporters/otlp": "tracing/otlp",
	"github.com/blevesearch/":                 "dev/esserver",
	"github.com/nsmithuk/local-kms":           "dev/kmsserver",
}

// programOnly returns the home of a program-only library path imports
// (see linkedOnlyFrom), or false.
func programOnly(path string) (home string, ok bool) {
	for prefix, home := range linkedOnlyFrom {
		if strings.HasPrefix(path, prefix) {
			return home, true
		}
	}
	return "", false
}

type listedPackage struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// rel is a package's path inside the module ("" for the root).
func rel(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
}

// packageMap reads the map of packages at the top of
// docs/architecture.md: a table whose rows start with a package path in
// backticks ("." for the root) and its floor.
func packageMap(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([^`]+)` \\| ([a-z]+) \\|")
	floors := map[string]string{}
	in := false
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == mapHeading:
			in = true
		case in && strings.HasPrefix(line, "## "):
			in = false
		case in:
			if m := row.FindStringSubmatch(line); m != nil {
				floors[strings.TrimPrefix(m[1], "./")] = m[2]
			}
		}
	}
	if len(floors) == 0 {
		t.Fatalf("%s has no %q table of `package` | floor | rows", architectureDoc, mapHeading)
	}
	return floors
}

// TestTheHouseKeepsItsRooms checks the layout docs/architecture.md
// describes against the packages as they are: every package is on the
// map and on a floor; each imports (outside its tests) only the floors
// its own may; the root package stays small; internal/ holds only leaf
// helpers; and the Kafka client libraries are used only in bus/kafka and
// the local broker (tests may use one to show that any Kafka client can
// talk to the pipeline).
func TestTheHouseKeepsItsRooms(t *testing.T) {
	pkgs := listPackages(t)
	floors := packageMap(t)
	floors[""] = floors["."]
	delete(floors, ".")

	listed := map[string]bool{}
	for _, p := range pkgs {
		listed[rel(p.ImportPath)] = true
		if _, ok := floors[rel(p.ImportPath)]; !ok {
			t.Errorf("package %s is not on the map in %s", p.ImportPath, architectureDoc)
		}
	}
	for path, floor := range floors {
		if !listed[path] {
			t.Errorf("the map in %s lists %q, which is no package", architectureDoc, path)
		}
		if _, ok := mayImport[floor]; !ok {
			t.Errorf("the map in %s puts %q on floor %q, which is none of %v", architectureDoc, path, floor, slices.Sorted(maps.Keys(mayImport)))
		}
	}

	for _, p := range pkgs {
		from := rel(p.ImportPath)
		floor := floors[from]
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := floors[rel(imp)]
			if !slices.Contains(mayImport[floor], to) {
				t.Errorf("%s (%s) imports %s (%s): a %s package may import only %v", p.ImportPath, floor, imp, to, floor, mayImport[floor])
			}
		}
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if home, ok := programOnly(imp); ok && from != home {
				t.Errorf("%s imports %s: only %s may (a program-only library, kept out of the other test binaries)", p.ImportPath, imp, home)
			}
		}
		kafkaHome := from == "bus/kafka" || strings.HasPrefix(from, "bus/kafka/") || from == "dev/kafkabroker"
		for _, imp := range p.Imports {
			if kafkaClient(imp) && !kafkaHome {
				t.Errorf("%s imports %s: only %s use a Kafka client library", p.ImportPath, imp, kafkaClientsOutside)
			}
		}
		switch {
		case from == "":
			if len(p.GoFiles) > maxRootFiles {
				t.Errorf("the root package has %d non-test files, want at most %d: %v", len(p.GoFiles), maxRootFiles, p.GoFiles)
			}
		case floor == floorInternal && !strings.HasPrefix(from, "internal/"),
			floor != floorInternal && strings.HasPrefix(from, "internal/"):
			t.Errorf("%s is on floor %s: internal/ and the internal floor are the same thing", p.ImportPath, floor)
		}
	}

	// The test helpers nearly every test binary links stay clear of the
	// program-only libraries, directly or not.
	for _, helper := range []string{"dev/testenv", "testkit/integration"} {
		out, err := exec.Command("go", "list", "-deps", "./"+helper).Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", helper, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if home, ok := programOnly(dep); ok {
				t.Errorf("%s links %s (through its imports): the test binaries built on it would carry %s's library", helper, dep, home)
			}
		}
	}

	lines := 0
	for _, p := range pkgs {
		if !strings.HasPrefix(rel(p.ImportPath), "internal/") {
			continue
		}
		for _, name := range p.GoFiles {
			b, err := os.ReadFile(filepath.Join(p.Dir, name))
			if err != nil {
				t.Fatal(err)
			}
			lines += strings.Count(string(b), "\n")
		}
	}
	if lines > maxInternalLines {
		t.Errorf("internal/ holds %d lines of non-test Go, want at most %d: only small leaf helpers live there", lines, maxInternalLines)
	}
}
