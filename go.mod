module github.com/edgeaip/edgeaip

go 1.26
