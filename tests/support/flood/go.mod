module star.dev/star-flood

go 1.26.0
