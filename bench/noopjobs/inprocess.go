package main

import "github.com/poolrun/poolrun/engine"

func init() { inProcess = engine.InProcess }
