package gossip

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/memberlist"
)

// Errors of the keyring operations.
var (
	// ErrNoEncryption: the membership runs without a gossip key, so it has
	// no keyring to change (a key cannot be added to an open cluster one
	// member at a time: the others would refuse its packets).
	ErrNoEncryption = errors.New("gossip: encryption is off: this member runs without a gossip key")
	// ErrKeyNotInstalled: UseKey of a key that is not installed.
	ErrKeyNotInstalled = errors.New("gossip: the key is not installed here")
	// ErrPrimaryKey: RemoveKey of the key in use.
	ErrPrimaryKey = errors.New("gossip: the key is in use (primary): use another key first")
)

// Keys is a member's gossip keyring: the primary key, which encrypts what
// it sends, and every installed key (primary first), any of which it
// accepts on what it receives.
type Keys struct {
	Primary []byte
	All     [][]byte
}

// KeyFingerprint names a key without showing it: the hex of the first 8
// bytes of its SHA-256. Listings show fingerprints only.
func KeyFingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

// keyring is the Membership's memberlist.Keyring and the file that keeps
// it across restarts (Config.KeyringFile). mu in Membership serializes
// the changes, each written to the file before memberlist sees it.
type keyring struct {
	ring *memberlist.Keyring // nil: encryption off
	file string
}

// keyringFile is the JSON form of Config.KeyringFile.
type keyringFile struct {
	Primary string   `json:"primary"`
	Keys    []string `json:"keys"`
}

// newKeyring builds the keyring from c: from c.KeyringFile when it exists
// (what the last rotation left, which wins over c.SecretKey), else from
// c.SecretKey alone. warn reports a SecretKey the file does not hold.
func newKeyring(c *Config) (k keyring, warn string, err error) {
	k.file = c.KeyringFile
	if k.file != "" {
		keys, primary, found, err := readKeyringFile(k.file)
		if err != nil {
			return k, "", err
		}
		if found {
			if len(c.SecretKey) > 0 && !slices.ContainsFunc(keys, func(b []byte) bool { return bytes.Equal(b, c.SecretKey) }) {
				warn = "the gossip key given at start is not in the keyring file; the file's keys are used (chime cluster keys rotated them)"
			}
			k.ring, err = memberlist.NewKeyring(keys, primary)
			return k, warn, err
		}
	}
	if len(c.SecretKey) > 0 {
		k.ring, err = memberlist.NewKeyring(nil, c.SecretKey)
	}
	return k, "", err
}

// readKeyringFile reads and checks a keyring file; found is false when it
// does not exist.
func readKeyringFile(path string) (keys [][]byte, primary []byte, found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("gossip: keyring file: %w", err)
	}
	var f keyringFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, false, fmt.Errorf("gossip: keyring file %s: %w", path, err)
	}
	if primary, err = ParseSecretKey(f.Primary); err != nil || primary == nil {
		return nil, nil, false, fmt.Errorf("gossip: keyring file %s: bad primary key: %v", path, err)
	}
	keys = [][]byte{primary}
	for i, s := range f.Keys {
		key, err := ParseSecretKey(s)
		if err != nil || key == nil {
			return nil, nil, false, fmt.Errorf("gossip: keyring file %s: bad key %d: %v", path, i, err)
		}
		if !slices.ContainsFunc(keys, func(b []byte) bool { return bytes.Equal(b, key) }) {
			keys = append(keys, key)
		}
	}
	return keys, primary, true, nil
}

// write saves keys (primary first) to the keyring file, if there is one,
// atomically and durably: a temporary file of mode 0600 in the same
// directory, synced, renamed over the old one, the directory synced.
func (k *keyring) write(keys [][]byte) error {
	if k.file == "" {
		return nil
	}
	f := keyringFile{Primary: base64.StdEncoding.EncodeToString(keys[0])}
	for _, key := range keys[1:] {
		f.Keys = append(f.Keys, base64.StdEncoding.EncodeToString(key))
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	dir := filepath.Dir(k.file)
	tmp, err := os.CreateTemp(dir, ".gossip-keyring-*")
	if err != nil {
		return fmt.Errorf("gossip: keyring file: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	_, err = tmp.Write(append(b, '\n'))
	err = errors.Join(err, tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), k.file)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(dir); err == nil {
			err = errors.Join(d.Sync(), d.Close())
		}
	}
	if err != nil {
		return fmt.Errorf("gossip: keyring file: %w", err)
	}
	return nil
}

// Keys returns this member's keyring, or ErrNoEncryption.
func (m *Membership) Keys() (Keys, error) {
	if m.keys.ring == nil {
		return Keys{}, ErrNoEncryption
	}
	all := cloneKeys(m.keys.ring.GetKeys())
	return Keys{Primary: all[0], All: all}, nil
}

// InstallKey adds key to the keyring: this member then accepts messages
// encrypted with it, and still sends with its primary key. Installing a
// key that is there already does nothing.
func (m *Membership) InstallKey(key []byte) error {
	return m.changeKeys(key, func(keys [][]byte) ([][]byte, error) {
		if slices.ContainsFunc(keys, func(b []byte) bool { return bytes.Equal(b, key) }) {
			return nil, nil
		}
		return append(keys, key), nil
	}, m.keys.ring.AddKey)
}

// UseKey makes an installed key the primary one: what this member sends is
// encrypted with it from now on. Use a key only once every member has it
// installed, or they cannot read this member.
func (m *Membership) UseKey(key []byte) error {
	return m.changeKeys(key, func(keys [][]byte) ([][]byte, error) {
		i := slices.IndexFunc(keys, func(b []byte) bool { return bytes.Equal(b, key) })
		switch {
		case i < 0:
			return nil, ErrKeyNotInstalled
		case i == 0:
			return nil, nil
		}
		return append([][]byte{key}, slices.Delete(keys, i, i+1)...), nil
	}, m.keys.ring.UseKey)
}

// RemoveKey removes a key that is not the primary one: messages encrypted
// with it are refused from now on. Removing a key that is not there does
// nothing.
func (m *Membership) RemoveKey(key []byte) error {
	return m.changeKeys(key, func(keys [][]byte) ([][]byte, error) {
		i := slices.IndexFunc(keys, func(b []byte) bool { return bytes.Equal(b, key) })
		switch {
		case i < 0:
			return nil, nil
		case i == 0:
			return nil, ErrPrimaryKey
		}
		return slices.Delete(keys, i, i+1), nil
	}, m.keys.ring.RemoveKey)
}

// changeKeys applies one keyring change: next computes the new key list
// (primary first) from the current one, or nil for no change; the list is
// written to the keyring file, then apply changes memberlist's keyring.
func (m *Membership) changeKeys(key []byte, next func([][]byte) ([][]byte, error), apply func([]byte) error) error {
	if m.keys.ring == nil {
		return ErrNoEncryption
	}
	if err := memberlist.ValidateKey(key); err != nil || len(key) != SecretKeySize {
		return fmt.Errorf("gossip: a key is %d bytes, want %d", len(key), SecretKeySize)
	}
	m.keyMu.Lock()
	defer m.keyMu.Unlock()
	keys, err := next(cloneKeys(m.keys.ring.GetKeys()))
	if err != nil || keys == nil {
		return err
	}
	if err := m.keys.write(keys); err != nil {
		return err
	}
	if err := apply(bytes.Clone(key)); err != nil {
		return fmt.Errorf("gossip: %w", err)
	}
	m.log.Info("gossip keyring changed", "primary", KeyFingerprint(keys[0]), "keys", len(keys))
	return nil
}

// cloneKeys copies a key list: memberlist's GetKeys returns its own.
func cloneKeys(keys [][]byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = bytes.Clone(k)
	}
	return out
}
