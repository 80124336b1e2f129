// Package dburl says what a database URL names without what it must keep secret, for logs,
// errors and CLI output. It is the one place Berth decides what of a database URL may be
// shown.
//
// A PostgreSQL URL is split the way libpq (and so pgx) splits it, not as net/url would: the
// user information ends at the first '@' before any '/', and the host list at the first '/'
// or '?'. What is shown is built from those parts only (scheme, user, hosts and ports,
// database, and the settings known to hold no secret); every other setting's value, the
// password included, is shown as xxxxx. A URL whose parts cannot be told apart for sure (an
// '@' after the user information, which is how a password with an unescaped '/', '?' or '@'
// reads) is not shown at all: Parse refuses it, and Redact gives a placeholder.
package dburl

import (
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Hidden stands for a value that is not shown.
const Hidden = "xxxxx"

// Unparsable stands for a whole database URL that is not shown because it does not parse.
const Unparsable = "(a database URL that does not parse; not shown)"

// ErrUnparsable is wrapped by Parse's errors: the text cannot be split into its parts with
// certainty, so none of it is shown.
var ErrUnparsable = errors.New("the database URL does not parse")

// URL is a parsed database URL: what may be shown of it, and what may not.
type URL struct {
	shown   string
	secrets []string
}

// String is the URL as it may be shown: its parts, with every secret value as xxxxx.
func (u URL) String() string { return u.shown }

// Scrub replaces in text every secret value of the URL (as written and as decoded), for
// text that may quote them, such as a database driver's error.
func (u URL) Scrub(text string) string {
	for _, s := range u.secrets {
		text = strings.ReplaceAll(text, s, Hidden)
	}
	return text
}

// Redact returns what Parse(raw).String() shows, or Unparsable when raw does not parse. It
// is what logs, errors and CLI output show of a database URL.
func Redact(raw string) string {
	u, err := Parse(raw)
	if err != nil {
		return Unparsable
	}
	return u.String()
}

var (
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
	// keyValueStart matches the start of PostgreSQL key=value connection settings.
	keyValueStart = regexp.MustCompile(`^[A-Za-z_]+\s*=`)
	// plainPath matches a bare file name or path, e.g. a file given without sqlite://.
	plainPath = regexp.MustCompile(`^[A-Za-z0-9._/~-]+$`)
)

// Parse splits raw into its parts: an sqlite:// or file: URL (shown as its file path), a
// URL of another scheme (split as libpq splits postgres:// ones), or PostgreSQL key=value
// settings. Its errors wrap ErrUnparsable and never quote raw.
func Parse(raw string) (URL, error) {
	s := strings.TrimSpace(raw)
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return URL{}, unparsable("it holds a NUL byte")
	case strings.HasPrefix(s, "sqlite://"), strings.HasPrefix(s, "file:"):
		// A file path holds no password; settings after it are not Berth's to show.
		path, _, _ := strings.Cut(s, "?")
		path, _, _ = strings.Cut(path, "#")
		return URL{shown: path}, nil
	case scheme.MatchString(s):
		return parseURI(s)
	case keyValueStart.MatchString(s):
		return parseKeyValue(s)
	case plainPath.MatchString(s):
		return URL{shown: s}, nil
	}
	return URL{}, unparsable("it is neither a URL (scheme://...) nor key=value settings")
}

func unparsable(why string) error {
	return &parseError{why: why}
}

type parseError struct{ why string }

func (e *parseError) Error() string { return ErrUnparsable.Error() + ": " + e.why }
func (e *parseError) Unwrap() error { return ErrUnparsable }

// encodeHint is what a URL with an ambiguous password should do.
const encodeHint = "percent-encode any of / ? # @ : % in the user name and password (e.g. / as %2F, ? as %3F, # as %23, @ as %40)"

// parseURI splits scheme://[user[:password]@]hosts[/database][?settings] as libpq does.
func parseURI(s string) (URL, error) {
	i := strings.Index(s, "://")
	prefix, rest := s[:i+3], s[i+3:]
	var (
		b       strings.Builder
		secrets []string
	)
	b.WriteString(prefix)
	if at := strings.IndexAny(rest, "@/"); at >= 0 && rest[at] == '@' {
		user, password, hasPassword := strings.Cut(rest[:at], ":")
		rest = rest[at+1:]
		if _, err := decode(user); err != nil {
			return URL{}, unparsable("its user name has a bad %-escape: " + encodeHint)
		}
		b.WriteString(user)
		if hasPassword {
			plain, err := decode(password)
			if err != nil {
				return URL{}, unparsable("its password has a bad %-escape: " + encodeHint)
			}
			secrets = append(secrets, password, plain)
			b.WriteString(":" + Hidden)
		}
		b.WriteString("@")
	}
	// libpq takes the first '@' as the end of the user information; another one after it
	// means a password (or user name) that holds an unescaped '/', '?' or '@', and the parts
	// after it would show some of that password as a host or a database.
	if strings.Contains(rest, "@") {
		return URL{}, unparsable("it has an '@' after the user information: " + encodeHint)
	}
	hosts, rest, _ := cutBefore(rest, "/?")
	if _, err := decode(hosts); err != nil {
		return URL{}, unparsable("its host has a bad %-escape")
	}
	b.WriteString(hosts)
	if strings.HasPrefix(rest, "/") {
		var database string
		database, rest, _ = cutBefore(rest[1:], "?")
		if _, err := decode(database); err != nil {
			return URL{}, unparsable("its database name has a bad %-escape")
		}
		b.WriteString("/" + database)
	}
	if query, ok := strings.CutPrefix(rest, "?"); ok && query != "" {
		var shown []string
		for pair := range strings.SplitSeq(query, "&") {
			rawKey, rawValue, found := strings.Cut(pair, "=")
			key, errKey := decode(rawKey)
			value, errValue := decode(rawValue)
			switch {
			case !found:
				return URL{}, unparsable("a setting after '?' has no '=': write ?key=value&key=value")
			case errKey != nil || errValue != nil:
				return URL{}, unparsable("a setting after '?' has a bad %-escape")
			default:
				shown = append(shown, showSetting(setting{rawKey, key, rawValue, value}, &secrets))
			}
		}
		b.WriteString("?" + strings.Join(shown, "&"))
	}
	return URL{shown: b.String(), secrets: cleanSecrets(secrets)}, nil
}

// cutBefore splits s before the first of the bytes in any.
func cutBefore(s, any string) (before, after string, found bool) {
	if i := strings.IndexAny(s, any); i >= 0 {
		return s[:i], s[i:], true
	}
	return s, "", false
}

// space is what separates key=value settings.
const space = " \t\n\r\v\f"

func decode(s string) (string, error) { return url.PathUnescape(s) }

// parseKeyValue splits PostgreSQL key=value settings as libpq does: a key, '=', and a value
// that is either quoted ('...', with \' and \\) or runs to the next white space (with \
// escaping the next byte).
func parseKeyValue(s string) (URL, error) {
	var (
		shown   []string
		secrets []string
	)
	s = strings.TrimLeft(s, space)
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return URL{}, unparsable("a setting has no '=': write key=value settings separated by spaces, quoting a value with spaces as 'value'")
		}
		key := strings.Trim(s[:eq], space)
		if key == "" || strings.ContainsAny(key, space) {
			return URL{}, unparsable("a setting has no key before '=', or a key with a space: quote a value with spaces as 'value'")
		}
		s = strings.TrimLeft(s[eq+1:], space)
		var rawValue, value string
		if strings.HasPrefix(s, "'") {
			end := 1
			for ; end < len(s) && s[end] != '\''; end++ {
				if s[end] == '\\' {
					end++
				}
			}
			if end >= len(s) {
				return URL{}, unparsable("a quoted value has no closing quote: write 'value', with \\' for a quote in it")
			}
			rawValue, s = s[:end+1], s[end+1:]
			value = unescape(rawValue[1:end])
		} else {
			end := 0
			for ; end < len(s) && !strings.ContainsRune(space, rune(s[end])); end++ {
				if s[end] == '\\' && end+1 < len(s) {
					end++
				}
			}
			rawValue, s = s[:end], s[end:]
			value = unescape(rawValue)
		}
		s = strings.TrimLeft(s, space)
		shown = append(shown, showSetting(setting{key, key, rawValue, value}, &secrets))
	}
	return URL{shown: strings.Join(shown, " "), secrets: cleanSecrets(secrets)}, nil
}

// unescape drops each backslash and keeps the byte after it.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			if i == len(s) {
				break
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cleanSecrets drops empty values and orders the rest longest first, so that Scrub hides a
// value whole before any shorter value inside it.
func cleanSecrets(secrets []string) []string {
	secrets = slices.DeleteFunc(secrets, func(s string) bool { return s == "" })
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(secrets)
}

// harmlessKeys are the libpq and pgx settings whose values hold no secret: where to connect,
// as whom, how (TLS modes and the paths of certificate files, not their contents or
// passwords) and the pool's tuning. Every other setting's value is hidden: password,
// sslpassword, options (which may carry anything) and any key Berth does not know.
var harmlessKeys = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "database": true, "user": true,
	"sslmode": true, "ssl": true, "sslcert": true, "sslkey": true, "sslrootcert": true, "sslcrl": true,
	"sslcrldir": true, "sslsni": true, "sslnegotiation": true, "sslcertmode": true, "sslcompression": true,
	"ssl_min_protocol_version": true, "ssl_max_protocol_version": true,
	"min_protocol_version": true, "max_protocol_version": true,
	"passfile": true, "service": true, "servicefile": true,
	"connect_timeout": true, "application_name": true, "fallback_application_name": true,
	"target_session_attrs": true, "load_balance_hosts": true,
	"keepalives": true, "keepalives_idle": true, "keepalives_interval": true, "keepalives_count": true,
	"tcp_user_timeout": true, "client_encoding": true, "datestyle": true, "timezone": true, "search_path": true,
	"gssencmode": true, "krbsrvname": true, "krbspn": true, "gsslib": true, "gssdelegation": true,
	"channel_binding": true, "require_auth": true, "replication": true, "requirepeer": true,
	"min_read_buffer_size": true, "statement_cache_capacity": true, "description_cache_capacity": true,
	"default_query_exec_mode": true,
	"pool_max_conns":          true, "pool_min_conns": true, "pool_min_idle_conns": true,
	"pool_max_conn_lifetime": true, "pool_max_conn_lifetime_jitter": true,
	"pool_max_conn_idle_time": true, "pool_health_check_period": true,
}

// secretKeys are the settings whose name may be shown but never their value.
var secretKeys = map[string]bool{"password": true, "sslpassword": true, "options": true}

// setting is one key=value setting, as written and as decoded.
type setting struct{ rawKey, key, rawValue, value string }

// showSetting returns how a setting is shown, adding to secrets what is hidden of it: the
// value of any setting not known to be harmless, and the name too of a setting Berth does not
// know, which may be a part of a password holding an unescaped '&' or space. A value that
// reads as another setting ("user= password=x" gives user "password=x", as libpq reads it)
// is hidden whatever its key.
func showSetting(s setting, secrets *[]string) string {
	k := strings.ToLower(s.key)
	switch {
	case harmlessKeys[k] && !strings.Contains(s.value, "="):
		return s.rawKey + "=" + s.rawValue
	case harmlessKeys[k] || secretKeys[k]:
		*secrets = append(*secrets, s.rawValue, s.value)
		return s.rawKey + "=" + Hidden
	default:
		*secrets = append(*secrets, s.rawKey, s.key, s.rawValue, s.value)
		return Hidden + "=" + Hidden
	}
}
