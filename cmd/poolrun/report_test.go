package main_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pageParts is what a test reads from a report's page: it parses the page
// whole with encoding/xml (poolrun writes it as well-formed XML), and
// keeps the drawn jobs' classes and hover texts, the workers' blocks and
// the text.
type pageParts struct {
	jobs    map[int][]string // data-job → "class: hover text", one per mark
	workers []string         // data-worker of each worker block, in order
	tables  []string         // the class of each table
	text    string
}

func readPage(t *testing.T, path string) pageParts {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pp := pageParts{jobs: map[int][]string{}}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var text strings.Builder
	job, class := 0, "" // the job mark being read, if any
	inTitle := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case tok.Name.Local == "script", attr["src"] != "", attr["href"] != "":
				t.Errorf("the page is not self-contained: <%s %v>", tok.Name.Local, tok.Attr)
			case attr["data-job"] != "":
				job, _ = strconv.Atoi(attr["data-job"])
				class = attr["class"]
			case attr["data-worker"] != "":
				pp.workers = append(pp.workers, attr["data-worker"])
			case tok.Name.Local == "table":
				pp.tables = append(pp.tables, attr["class"])
			}
			inTitle = tok.Name.Local == "title" && job != 0
		case xml.EndElement:
			if tok.Name.Local == "rect" {
				job = 0
			}
			inTitle = false
		case xml.CharData:
			text.Write(tok)
			if inTitle {
				pp.jobs[job] = append(pp.jobs[job], class+": "+string(tok))
			}
		}
	}
	pp.text = text.String()
	return pp
}

// TestReportPage runs a small workflow on two workers with --report, then
// poolrun report on its report: the report has version 2 and samples of
// every worker, and the page draws every job, by its id, coloured by how
// it ended, on a worker's lane or among those that never ran.
func TestReportPage(t *testing.T) {
	dir := t.TempDir()
	wf := `items:
  ref:
    run: head -c 100000 /dev/zero > "$POOLRUN_ITEM"
jobs:
  - id: prepare
    run: sleep 0.2
  - id: use-${i}
    foreach: {i: 1..4}
    run: sleep 0.05
    needs: [ref]
    after: [prepare]
  - id: broken
    run: echo 'no <disk> & "no" luck' >&2; exit 3
    after: [prepare]
  - id: after-broken
    run: 'true'
    after: [broken]
`
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644)
	if r := poolrun(t, dir, "run", "-k", "-j", "2", "--quiet", "--report", "r.json", "wf.yaml"); r.code != 1 {
		t.Fatalf("run: exit %d, want 1 (a job fails)\n%s", r.code, r.stderr)
	}
	var rep struct {
		Version int `json:"version"`
		Workers []struct {
			Index   int `json:"index"`
			Samples []struct {
				T float64 `json:"t"`
			} `json:"samples"`
		} `json:"workers"`
		Jobs []struct {
			ID     int               `json:"id"`
			Labels map[string]string `json:"labels"`
			Status string            `json:"status"`
		} `json:"jobs"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != 2 || len(rep.Workers) != 2 || len(rep.Jobs) != 7 {
		t.Fatalf("report: version %d, %d workers, %d jobs; want 2, 2, 7", rep.Version, len(rep.Workers), len(rep.Jobs))
	}
	for _, w := range rep.Workers {
		if len(w.Samples) == 0 {
			t.Errorf("worker %d has no samples", w.Index)
		}
	}

	r := poolrun(t, dir, "report", "r.json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "r.html" {
		t.Fatalf("report: exit %d, printed %q\n%s", r.code, r.stdout, r.stderr)
	}
	page := readPage(t, filepath.Join(dir, "r.html"))
	if strings.Join(page.workers, ",") != "1,2" {
		t.Errorf("worker blocks %v, want 1,2", page.workers)
	}
	for _, j := range rep.Jobs {
		id := j.Labels["id"]
		marks := page.jobs[j.ID]
		if len(marks) != 1 {
			t.Errorf("job %d %q: %d marks on the page, want 1", j.ID, id, len(marks))
			continue
		}
		mark := marks[0]
		kind := "job "
		if id == "after-broken" {
			kind = "notrun "
		}
		if !strings.HasPrefix(mark, kind+j.Status) || !strings.Contains(mark, strconv.Quote(id)) {
			t.Errorf("job %q (%s): its mark is %q", id, j.Status, mark)
		}
	}
	for _, j := range rep.Jobs {
		if m := page.jobs[j.ID]; j.Labels["id"] == "broken" && (len(m) == 0 || !strings.Contains(m[0], `no <disk> & "no" luck`)) {
			t.Errorf("the failed job's hover text does not hold its error: %q", m)
		}
	}
	for _, want := range []string{"totals", "workers", "unsuccessful"} {
		if !strings.Contains(strings.Join(page.tables, " "), want) {
			t.Errorf("no %s table on the page (tables: %v)", want, page.tables)
		}
	}

	// -o names the page.
	if r := poolrun(t, dir, "report", "-o", "page.html", "r.json"); r.code != 0 {
		t.Errorf("report -o: exit %d\n%s", r.code, r.stderr)
	} else if _, err := os.Stat(filepath.Join(dir, "page.html")); err != nil {
		t.Error(err)
	}
}

// A bench report's page says what it cannot show; bad input is refused
// with exit status 2 and a message that names the file.
func TestReportBenchAndBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := poolrun(t, dir, "bench", "--scale", "0.02", "-j", "1", "--modes", "all", "--quiet", "--report", "b.json"); r.code != 0 {
		t.Fatalf("bench: exit %d\n%s", r.code, r.stderr)
	}
	if r := poolrun(t, dir, "report", "b.json"); r.code != 0 {
		t.Fatalf("report of a bench: exit %d\n%s", r.code, r.stderr)
	}
	page := readPage(t, filepath.Join(dir, "b.html"))
	if !strings.Contains(page.text, "No timelines here") || len(page.jobs) != 0 {
		t.Errorf("a bench report's page: want no jobs and a note saying why; %d jobs", len(page.jobs))
	}
	if !strings.Contains(strings.Join(page.tables, " "), "runs") {
		t.Errorf("no table of runs: %v", page.tables)
	}

	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: a\n    run: 'true'\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "new.json"), []byte(`{"version": 3, "command": "run", "workers": [], "jobs": [], "totals": {}}`), 0o644)
	for _, tt := range []struct {
		name string
		args []string
		says string
	}{
		{"missing", []string{"report", "none.json"}, "none.json: no such file"},
		{"not a report", []string{"report", "wf.yaml"}, "wf.yaml: not a poolrun report"},
		{"newer version", []string{"report", "new.json"}, "new.json: unknown report version 3"},
		{"bad format", []string{"report", "--format", "svg", "new.json"}, "--format svg: want html or trace"},
		{"trace of a bench", []string{"report", "--format", "trace", "b.json"}, "holds no timeline to trace"},
		{"no file", []string{"report"}, "want one report file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := poolrun(t, dir, tt.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.says) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tt.says)
			}
		})
	}
	if html, _ := filepath.Glob(filepath.Join(dir, "*.html")); len(html) != 1 {
		t.Errorf("pages %v: want only the bench's", html)
	}
}
