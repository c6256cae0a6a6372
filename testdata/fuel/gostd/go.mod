module github.com/edgeaip/edgeaip/testdata/fuel/gostd

go 1.26
