module github.com/idnhq/idn/httpsig

go 1.26.0

require github.com/dunglas/httpsfv v1.1.2
