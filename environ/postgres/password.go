package postgres

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// scramIterations is PostgreSQL's default scram_iterations.
const scramIterations = 4096

// errNoPasswordFile is a password file that is missing or empty.
var errNoPasswordFile = errors.New("the password file is missing")

// passwordPath is the file of role's password in dir.
func passwordPath(dir, role string) string { return filepath.Join(dir, role+".password") }

// readPassword returns the role's password from its file in dir; a file that is missing or
// empty is errNoPasswordFile. Errors name the file, never its content.
func readPassword(dir, role string) (string, error) {
	path := passwordPath(dir, role)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) || (err == nil && strings.TrimSpace(string(data)) == ""):
		return "", fmt.Errorf("%w: %s", errNoPasswordFile, path)
	case err != nil:
		return "", fmt.Errorf("read the password file %s: %w", path, pathError(err))
	}
	return strings.TrimSpace(string(data)), nil
}

// ensurePassword returns the role's password from its file in dir, and whether it had to
// make one: a file that is missing or empty gets a new password (32 random bytes,
// base64url), written atomically with mode 0600.
func ensurePassword(dir, role string) (password string, created bool, err error) {
	password, err = readPassword(dir, role)
	if !errors.Is(err, errNoPasswordFile) {
		return password, false, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, fmt.Errorf("generate a password: %w", err)
	}
	password = base64.RawURLEncoding.EncodeToString(raw[:])
	if err := writeFileAtomic(passwordPath(dir, role), []byte(password+"\n")); err != nil {
		return "", false, err
	}
	return password, true, nil
}

// writeFileAtomic writes data to path through a temporary file in its directory (made,
// mode 0700, if it is missing), so that a reader never sees half a password.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make the password directory %s: %w", dir, pathError(err))
	}
	tmp, err := os.CreateTemp(dir, ".password-*")
	if err != nil {
		return fmt.Errorf("write a password file in %s: %w", dir, pathError(err))
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write the password file %s: %w", path, pathError(err))
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write the password file %s: %w", path, pathError(err))
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("write the password file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write the password file %s: %w", path, err)
	}
	return nil
}

// removePasswordFile removes the role's password file; one that is gone is a success.
func removePasswordFile(dir, role string) error {
	path := passwordPath(dir, role)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the password file %s: %w", path, pathError(err))
	}
	return nil
}

// scramVerifier is the SCRAM-SHA-256 verifier of password with a new random salt, in the
// form PostgreSQL stores (pg_authid.rolpassword) and accepts in place of a password. The
// environ sends the verifier, so the password itself never reaches the server's statement
// log. The password is ASCII, which SASLprep leaves as it is.
func scramVerifier(password string) (string, error) {
	var salt [16]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return "", fmt.Errorf("generate a salt: %w", err)
	}
	return scramVerifierWithSalt(password, salt[:], scramIterations)
}

func scramVerifierWithSalt(password string, salt []byte, iterations int) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("derive the password verifier: %w", err)
	}
	clientKey := hmacSHA256(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := hmacSHA256(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(storedKey[:]), b64(serverKey)), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
