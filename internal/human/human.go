// Package human formats figures for people: sizes in binary units,
// durations rounded to what a reader compares, counts and plurals. The
// end of a run, poolrun's tables and the report's page show their
// figures through it, so that they agree.
package human

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Bytes shows n bytes in binary units: 512 B, 1.5 KiB, 38.1 MiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	v := float64(n) / unit
	i := 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// RSS shows a peak resident set size as [Bytes] does, "-" where it is
// unknown (0 or less).
func RSS(n int64) string {
	if n <= 0 {
		return "-"
	}
	return Bytes(n)
}

// MiBSeconds shows byte-seconds as MiB·s, with two decimals below 10.
func MiBSeconds(bs float64) string {
	v := bs / (1 << 20)
	switch {
	case v == 0:
		return "0"
	case v < 0.01:
		return "<0.01"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

// Duration shows d rounded to a millisecond, to 10 ms from a second on
// and to 100 ms from 10 s on.
func Duration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// Count shows a count, which is whole unless it is the median of an even
// number of runs (one decimal then).
func Count(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// Plural is "s" unless n is 1: fmt.Sprintf("%d job%s", n, Plural(n)).
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Clip shortens s to at most n bytes, on a rune boundary, marking the
// cut with "…".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
