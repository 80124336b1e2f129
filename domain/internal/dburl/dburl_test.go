package dburl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain/internal/dburl"
)

func TestShownForms(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:pw@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgresql://u@h/db", "postgresql://u@h/db"},
		{"postgres://u@h/db?password=pw", "postgres://u@h/db?password=xxxxx"},
		{"postgres://u@h/db?sslpassword=pw&sslmode=verify-full&connect_timeout=5", "postgres://u@h/db?sslpassword=xxxxx&sslmode=verify-full&connect_timeout=5"},
		{"postgres://u:p%2Fw@h1:5432,h2:5433/db", "postgres://u:xxxxx@h1:5432,h2:5433/db"},
		{"postgres://u:p?w#1@[::1]:5432/db", "postgres://u:xxxxx@[::1]:5432/db"},
		{"postgres:///db?host=/run/postgresql", "postgres:///db?host=/run/postgresql"},
		{"postgres://h/db?options=-c%20x%3Dy&token=t", "postgres://h/db?options=xxxxx&xxxxx=xxxxx"},
		{"  postgres://u@h/db  ", "postgres://u@h/db"},
		{"host=h user=u password=pw dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"host=h password='p w' dbname=db", "host=h password=xxxxx dbname=db"},
		{"host = h  sslpassword = pw sslmode=require", "host=h sslpassword=xxxxx sslmode=require"},
		{"host=h application_name='berth agent'", "host=h application_name='berth agent'"},
		{"sqlite:///srv/berth.db", "sqlite:///srv/berth.db"},
		{"sqlite:///srv/berth.db?key=secret", "sqlite:///srv/berth.db"},
		{"file:berth.db", "file:berth.db"},
		{"berth.db", "berth.db"},
		{"mysql://u:pw@h/db", "mysql://u:xxxxx@h/db"},
	} {
		u, err := dburl.Parse(tc.in)
		if err != nil || u.String() != tc.want || dburl.Redact(tc.in) != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, u, err, tc.want)
		}
	}
}

// hostile are database URLs written carelessly or on purpose so that a part of a secret
// could be taken for a host, a database or a setting. Every one holds the text "s3cret".
var hostile = []string{
	// A password with an unescaped '/' reads, to libpq, as host "u", port "Pg" and the
	// database "Secret#1@host/db"; with a port of digits it even connects there.
	"postgres://u:Pg/s3cret#1@host/db",
	"postgres://u:123/s3cret@host/db",
	"postgres://u:a?s3cret@host/db?sslmode=disable",
	"postgres://u:p@s3cret@host/db",
	"postgresql://u:s3cret@@host/db",
	"postgres://u:s3cret%zz@host/db",
	"postgres://u:s3cret@host/db?sslmode",
	"postgres://u:s3cret@host:notaport/db",
	"postgres://u@host/db?password=s3cret",
	"postgres://u@host/db?sslpassword=s3cret&sslmode=require",
	"postgres://u@host/db?PASSWORD=s3cret",
	"postgres://u@host/db?options=-c%20password%3Ds3cret",
	"postgres://u@host/db?api_token=s3cret&client_secret=s3cret",
	"postgres://u@host/db?password=pw&s3cret=",
	"postgres://u@host/db?application_name=x%3Ds3cret",
	"postgres://u:s3cret\x00@host/db",
	"host=h password=s3cret",
	"host=h password = 's3cret with spaces'",
	"host=h password='it\\'s s3cret'",
	"host=h sslpassword=s3cret sslmode=require",
	"host=h password='s3cret",
	"host=h password=s3cret junk",
	"host=h passw ord=s3cret",
	"host=h password=pw s3cret=x",
	"host=h user= password=s3cret",
	"user=u password=s3cret\\ word dbname=db",
	"mysql://u:s3cret@h/db",
	"mysql://u:Pg/s3cret@h/db",
	"u:s3cret@host/db",
	"sqlite:///srv/berth.db?_pragma=key('s3cret')",
	"file:berth.db#s3cret",
}

func TestNoSecretIsShown(t *testing.T) {
	for _, raw := range hostile {
		shown := dburl.Redact(raw)
		if strings.Contains(shown, "s3cret") {
			t.Errorf("Redact(%q) = %q: it shows the secret", raw, shown)
		}
		u, err := dburl.Parse(raw)
		if err != nil {
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Parse(%q) error %q quotes the secret", raw, err)
			}
			if !errors.Is(err, dburl.ErrUnparsable) || shown != dburl.Unparsable {
				t.Errorf("Parse(%q): %v, Redact %q; want ErrUnparsable and the placeholder", raw, err, shown)
			}
			continue
		}
		driverError := "cannot parse `" + raw + "`: failed to connect"
		if scrubbed := u.Scrub(driverError); strings.Contains(scrubbed, "s3cret") && !strings.HasPrefix(raw, "sqlite:") && !strings.HasPrefix(raw, "file:") {
			t.Errorf("Parse(%q).Scrub left the secret in %q", raw, scrubbed)
		}
	}
}

// An unescaped '/' in the password is the mistake a user most likely makes: the error says
// how to write it.
func TestAmbiguousURLSaysHowToEncode(t *testing.T) {
	_, err := dburl.Parse("postgres://u:Pg/Secret#1@host/db")
	if err == nil || !strings.Contains(err.Error(), "%2F") || strings.Contains(err.Error(), "Secret") {
		t.Fatalf("Parse of a password with '/': %v, want an error saying to write / as %%2F, without the password", err)
	}
}

// FuzzRedactHidesThePassword writes a password holding the text "S3CR3T" (with anything
// around it) into each form of database URL, and checks Redact never shows that text.
func FuzzRedactHidesThePassword(f *testing.F) {
	for _, seed := range [][2]string{{"", ""}, {"Pg/", "#1"}, {"a?", "@b"}, {"p@", ""}, {"x%zz", ""}, {"' ", "'"}, {`\`, `\`}, {"&", "="}} {
		f.Add("u", seed[0], seed[1], "host", "db")
	}
	f.Fuzz(func(t *testing.T, user, before, after, host, database string) {
		const marker = "S3CR3T"
		// The user, host and database are shown: the marker may only stand in the password.
		user, host, database = strings.ReplaceAll(user, marker, ""), strings.ReplaceAll(host, marker, ""), strings.ReplaceAll(database, marker, "")
		password := before + marker + after
		quoted := strings.ReplaceAll(strings.ReplaceAll(password, `\`, `\\`), `'`, `\'`)
		for _, raw := range []string{
			"postgres://" + user + ":" + password + "@" + host + "/" + database,
			"postgres://" + user + "@" + host + "/" + database + "?password=" + password,
			"host=" + host + " user=" + user + " password='" + quoted + "' dbname=" + database,
		} {
			if shown := dburl.Redact(raw); strings.Contains(shown, marker) {
				t.Fatalf("Redact(%q) = %q shows the password %q", raw, shown, password)
			}
		}
	})
}
