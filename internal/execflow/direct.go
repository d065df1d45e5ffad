package execflow

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Like make, a command made of plain words only (no quote, variable,
// glob, redirection, pipe, list or comment; a first word that is not
// reserved, not a variable assignment and not one of the shell's own
// commands) is executed directly rather than through /bin/sh -c: the
// shell would do no more than split it into its words and execute its
// first, and starting it costs as much as starting the command. What the
// command sees is the same: its arguments, environment, folder, process
// group and descriptors. A command that cannot be started directly (not
// found, not executable, a script without #!) is given to /bin/sh -c after
// all, which says why, with the shell's exit status (127, 126).

// plainByte reports, for each byte, whether it may appear in a word of a
// command that is executed directly.
var plainByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "_-./,:=+@%" {
		t[c] = true
	}
	return t
}()

// shellWords are the first words that the shell must see: reserved words,
// its special and regular built-ins (which have no program of their own,
// or one that behaves otherwise: echo and pwd), and what changes the
// shell itself.
var shellWords = map[string]bool{
	"case": true, "do": true, "done": true, "elif": true, "else": true,
	"esac": true, "fi": true, "for": true, "if": true, "in": true,
	"then": true, "until": true, "while": true, "function": true,
	"select": true, "time": true,
	".": true, ":": true, "alias": true, "bg": true, "break": true,
	"cd": true, "command": true, "continue": true, "echo": true,
	"eval": true, "exec": true, "exit": true, "export": true, "fc": true,
	"fg": true, "getopts": true, "hash": true, "jobs": true, "local": true,
	"printf": true, "pwd": true, "read": true, "readonly": true,
	"return": true, "set": true, "shift": true, "source": true,
	"test": true, "times": true, "trap": true, "type": true,
	"ulimit": true, "umask": true, "unalias": true, "unset": true,
	"wait": true,
}

// plainWords returns the words of run if it is made of plain words only
// (see above), or nil.
func plainWords(run string) []string {
	for i := 0; i < len(run); i++ {
		if c := run[i]; !plainByte[c] && c != ' ' && c != '\t' {
			return nil
		}
	}
	words := strings.Fields(run)
	if len(words) == 0 || shellWords[words[0]] || strings.IndexByte(words[0], '=') >= 0 {
		return nil
	}
	return words
}

// lookPaths caches what lookPath found, by PATH and name.
var lookPaths struct {
	sync.Mutex
	m map[[2]string]string
}

// maxLookPaths bounds lookPaths.
const maxLookPaths = 1024

// lookPath returns the program that the shell would execute for name,
// searching pathEnv (the command's PATH) as the shell does, or "" when it
// cannot tell: name not found as an absolute path, or PATH holding a
// relative folder. A name with a slash is returned as it is (relative to
// the command's folder).
func lookPath(name, pathEnv string) string {
	if strings.IndexByte(name, '/') >= 0 {
		return name
	}
	key := [2]string{pathEnv, name}
	lookPaths.Lock()
	p, ok := lookPaths.m[key]
	lookPaths.Unlock()
	if ok {
		return p
	}
	p = ""
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			break // "" or a relative folder: the shell's business
		}
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			p = path
			break
		}
	}
	lookPaths.Lock()
	if lookPaths.m == nil || len(lookPaths.m) >= maxLookPaths {
		lookPaths.m = make(map[[2]string]string)
	}
	lookPaths.m[key] = p
	lookPaths.Unlock()
	return p
}

// envValue returns the value of the last name=... entry of env, as the
// shell sees it, or "".
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// devNull is /dev/null, opened once for every command's standard input.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })
