package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
)

const versionUsage = `Usage: poolrun version
       poolrun --version

Prints the version of this poolrun on one line: the module's version (a
tag, a pseudo-version, or "(devel)" for a build from a checkout), then,
where the build recorded them, the commit it was built from, that
commit's time and whether the checkout had changes ("modified"), then
the Go toolchain and the platform.
`

// versionLine is what poolrun version prints: the module's version and
// commit, as the build recorded them (runtime/debug.ReadBuildInfo).
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return formatVersion(bi)
}

// formatVersion words the version of bi (nil: nothing is known).
func formatVersion(bi *debug.BuildInfo) string {
	version, goVersion := "(devel)", runtime.Version()
	var vcs []string
	if bi != nil {
		if v := bi.Main.Version; v != "" {
			version = v
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		var rev, when, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			vcs = append(vcs, "commit "+rev[:min(len(rev), 12)])
			if when != "" {
				vcs = append(vcs, when)
			}
			if modified == "true" {
				vcs = append(vcs, "modified")
			}
		}
	}
	line := "poolrun " + version
	if len(vcs) > 0 {
		line += " (" + strings.Join(vcs, ", ") + ")"
	}
	return line + " " + goVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}
