//go:build tools

// Package tools names the GCS emulator the local cluster's artifact repository points at: fake-gcs-server,
// which speaks the JSON and XML APIs that cloud.google.com/go/storage (Argo's GCS driver) and the Python
// client use when STORAGE_EMULATOR_HOST is set.
package tools

import _ "github.com/fsouza/fake-gcs-server"
