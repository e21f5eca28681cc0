module github.com/seqby/seqby

go 1.26.0
