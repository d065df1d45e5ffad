// Package report is the report of a pool run: the JSON that poolrun
// scaffold, run and bench write with --report, and the page and trace
// that poolrun report makes of it.
//
// The schema, every field of docs/REPORT.md, is in schema.go: [Pool] for
// scaffold and run, [Bench] for bench. [Write] writes one atomically;
// [Load] (or [Read], [Decode]) reads one back as a [File], reports of
// older versions included.
//
// A [Recorder] builds a Pool's jobs, items and budget figures from the
// engine's events while the pool runs, and a [Sampler] its workers'
// cache and memory over time.
//
// [Render] draws the page: one HTML file that opens offline, made from
// page.html and page.css (embedded) through html/template, so that every
// text of the report (a job id, a command, an error) shows as text. The
// timeline's geometry is computed into plain structs first (geometry.go);
// the templates only place them. [WriteTrace] writes the same run in the
// Chrome trace event format, for Perfetto.
package report
