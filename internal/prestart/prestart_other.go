//go:build !linux

package prestart
